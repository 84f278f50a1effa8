"""Tools for testing Ember itself (not needed to use it): :mod:`ember.testing.fuzz`."""
