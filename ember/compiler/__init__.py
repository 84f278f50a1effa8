"""From a graph module to an Executable: the passes, kernel lowering per fused group, the
program and its memory plan. ``ember.compile`` is the front door (:mod:`.compile`), imported
here only when asked for: ``ember.load`` takes :mod:`.executable` alone, without the compiler."""


def __getattr__(name: str):
    if name == "compile_model":
        from .compile import compile_model

        return compile_model
    raise AttributeError(name)


__all__ = ["compile_model"]
