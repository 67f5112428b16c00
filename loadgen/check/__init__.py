"""``ramp check URL``: a deployment spot-check through the official OpenAI Python SDK (the client most
applications use), so "compatible" means what it means to them, plus a one-request baseline and a short
ramp through ramp's own client. A face: ``flags`` (the flags, light: ``ramp`` imports them at start),
``main`` (order, exit code), ``session`` (the SDK client),
``api_checks`` (generation), ``edge_checks`` (errors, /metrics, /tokenize, rate limits), ``speed``
(baseline and ramp), ``results`` (the report, text and JSON). The package itself imports nothing:
``from loadgen.check.main import check_main, run_checks``.
"""
