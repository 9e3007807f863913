"""scripts/tsan_reports.py: which ThreadSanitizer reports are gRPC's own
hand-offs (both accesses gRPC's code, on memory gRPC allocated or on a
reactor from its gRPC constructor to gRPC's callback) and which are ours. The fixtures are real reports from `make test-tsan`; the variants change
one fact each, and each change makes the report ours."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import tsan_reports  # noqa: E402


def fixture(name):
    with open(os.path.join(HERE, "reports", name)) as f:
        return f.read()


class TsanReportsTest(unittest.TestCase):
    def test_the_real_reports_are_grpcs_hand_offs(self):
        unref = tsan_reports.is_grpc_handoff(fixture("grpc_handoff_unref.txt"))
        self.assertIsNotNone(unref)
        self.assertEqual(unref, ["grpc::internal::ServerCallbackCall::Unref",
                                 "grpc::internal::CallbackUnaryHandler::RunHandler"])
        finalize = tsan_reports.is_grpc_handoff(fixture("grpc_handoff_finalize.txt"))
        self.assertIsNotNone(finalize)
        self.assertEqual(finalize, ["grpc::internal::CallOpSet::FinalizeResult", "grpc::internal::CallOpSet::FillOps"])

    def test_a_reactor_we_allocated_is_grpcs_from_its_construction_to_its_callbacks(self):
        report = fixture("grpc_reactor_construction.txt")
        self.assertEqual(tsan_reports.is_grpc_handoff(report), ["grpc::internal::CatchingCallback",
                                                                "grpc::ServerWriteReactor::ServerWriteReactor"])
        # The same memory written by our code (our reactor's own constructor) is ours.
        ours = report.replace("    #0 grpc::ServerWriteReactor<warden::v1::CommandEvent>::ServerWriteReactor() ",
                              "    #0 warden::QueuedWriter<warden::v1::CommandEvent>::QueuedWriter() ", 1)
        self.assertIn("#0 warden::QueuedWriter", ours)
        self.assertIsNone(tsan_reports.is_grpc_handoff(ours))
        # Read by our code: ours.
        ours = report.replace("    #2 void grpc::internal::CatchingCallback<", "    #2 void warden::Pump<", 1)
        self.assertIn("#2 void warden::Pump<", ours)
        self.assertIsNone(tsan_reports.is_grpc_handoff(ours))

    def test_an_access_by_our_code_is_ours(self):
        report = fixture("grpc_handoff_unref.txt").replace(
            "    #0 grpc::internal::CallbackUnaryHandler<warden::v1::RestartContextRequest, warden::v1::Context>::RunHandler(",
            "    #0 warden::ExecutorService::RestartContext(", 1)
        self.assertIn("#0 warden::ExecutorService::RestartContext(", report)
        self.assertIsNone(tsan_reports.is_grpc_handoff(report))

    def test_memory_we_allocated_is_ours(self):
        report = fixture("grpc_handoff_finalize.txt").replace("gpr_malloc", "operator new")
        self.assertIsNone(tsan_reports.is_grpc_handoff(report))

    def test_other_kinds_of_report_are_ours(self):
        report = fixture("grpc_handoff_unref.txt").replace(
            "WARNING: ThreadSanitizer: data race", "WARNING: ThreadSanitizer: lock-order-inversion (potential deadlock)")
        self.assertIsNone(tsan_reports.is_grpc_handoff(report))

    def test_main_fails_only_on_ours(self):
        with tempfile.TemporaryDirectory() as d:
            grpc_only = os.path.join(d, "tsan.1")
            with open(grpc_only, "w") as f:
                f.write(fixture("grpc_handoff_unref.txt") + fixture("grpc_handoff_finalize.txt"))
            ours = os.path.join(d, "tsan.2")
            with open(ours, "w") as f:
                f.write(fixture("grpc_handoff_finalize.txt").replace("gpr_malloc", "operator new"))
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(tsan_reports.main([grpc_only]), 0)
                self.assertEqual(tsan_reports.main([grpc_only, ours]), 1)
            self.assertEqual(out.getvalue().count("gRPC's own hand-off"), 4)  # two reports, read twice
            self.assertIn("==== sanitizer report " + ours, out.getvalue())


if __name__ == "__main__":
    unittest.main()
