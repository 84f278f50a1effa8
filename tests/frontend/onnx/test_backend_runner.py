"""onnx's own backend test runner (``onnx.backend.test.BackendTest``) drives Ember."""
import unittest
import warnings

import onnx.backend.test

from ember.frontend.onnx import backend

CASES = r"(test_relu|test_conv_with_strides_padding|test_gemm_default_no_bias|test_maxpool_2d_pads|" \
        r"test_softmax_axis_1|test_reshape_reordered_all_dims|test_concat_2d_axis_0|test_gather_0|" \
        r"test_resize_upsample_scales_nearest|test_light_squeezenet)_cpu$"


def test_onnx_backend_test_runner():
    bt = onnx.backend.test.BackendTest(backend, __name__)
    bt.include(CASES)
    suite = unittest.TestSuite()
    for case in bt.test_cases.values():
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(case))
    assert suite.countTestCases() >= 8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = unittest.TextTestRunner(verbosity=0).run(suite)
    assert not result.failures and not result.errors, result.failures + result.errors
    assert result.testsRun - len(result.skipped) >= 8
