"""``ramp check URL``: a deployment spot-check through the official OpenAI Python SDK (the client most
applications use), so "compatible" means what it means to them, plus a one-request baseline and a short
ramp through ramp's own client. A face: ``main`` (flags, order, exit code), ``session`` (the SDK client),
``api_checks`` (generation), ``edge_checks`` (errors, /metrics, /tokenize, rate limits), ``speed``
(baseline and ramp), ``results`` (the report, text and JSON).
"""

from loadgen.check.main import DESCRIPTION, add_check_flags, check_main, run_checks
from loadgen.check.results import CheckReport, CheckResult

__all__ = ["DESCRIPTION", "CheckReport", "CheckResult", "add_check_flags", "check_main", "run_checks"]
