"""``ramp run URL --replay-session RECORD``: a recorded session run again as a plan against another server
(``loadgen.analysis.session`` reads it), so that an exploration at the console becomes a CI gate.

The steps, their order, levels or rates, warm-ups and lengths are the record's; so is the prompts' seed
(the same prompts again) unless ``--seed`` gives another; the workload is the run's ``--profile`` (the line
before the run says when it is not the one the record ran); the SLO is the record's, or the profile's with ``--replay-slo profile`` (said before
the run, as is the step count). The new record's header names the session it replays (``replay_of``).

Exit codes, those of a headless run (``loadgen.exits``) with the SLO's verdict replaced by the gate's
(``loadgen.analysis.session.gate``): 0 = the replay met the SLO at every step where the original met it
(if the original met it nowhere, a headless run's own rule: met at some clean step); 1 = it missed one of
them; 2 = the record cannot be replayed (one line, the record untouched, no new record) or a flag fights
the session; 3 = the target is unreachable; 4 and 128 + N as any run.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from loadgen.cli.checks import quality_slo_problem
from loadgen.cli.flags import RunFlags
from loadgen.exits import EXIT_OK, EXIT_SLO, EXIT_UNREACHABLE, UsageError

if TYPE_CHECKING:
    from loadgen.config import SLO
    from loadgen.profile import Profile

__all__ = ["replay_session"]


def _conflicts(flags: RunFlags) -> None:
    """The flags whose say the session has (the steps' levels, lengths and warm-ups, how they end): refused."""
    given = {
        "--steps": flags.steps is not None,
        "--level": flags.level is not None,
        "--rate": flags.rate is not None,
        "--open-loop": flags.open_loop,
        "--step-seconds": flags.step_seconds is not None,
        "--warmup": flags.warmup is not None,
        "--repeat": flags.repeat != 1,
        "--precision": flags.precision is not None,
        "--early-stop": flags.early_stop,
        "--find-max": flags.find_max is not None,
        "--trace": flags.trace is not None,
        "--requests": flags.requests is not None,
    }
    if any(given.values()):
        drop = ", ".join(name for name, set_ in given.items() if set_)
        raise UsageError(
            f"--replay-session runs the record's own steps (levels, lengths, warm-ups): drop {drop}"
        )


def _refuse_unprobed(slo: SLO, profile: Profile) -> None:
    """An SLO clause on the answers (``quality_agree_min``) with no answer probes in the profile: refused."""
    problem = quality_slo_problem(slo, profile.quality, profile.name)
    if problem is not None:
        raise UsageError(problem)


def replay_session(flags: RunFlags, url: str) -> int:
    """Read the session, refuse what cannot run, then run its plan (console or headless) against ``url``
    (``ramp run``'s target, ``OPENAI_BASE_URL`` already applied) and gate the exit code."""
    from loadgen.analysis.session import SessionError, SloSource, gate, read_session, slo_text
    from loadgen.cli.headless import finish, reachable, run_face, say
    from loadgen.cli.resolve import resolve

    assert flags.replay_session is not None
    _conflicts(flags)
    try:  # before anything is resolved: a record refused leaves no new record behind
        session = read_session(flags.replay_session)
        arrival, burstiness = session.arrival()
        recorded_slo = session.slo()
    except SessionError as exc:
        raise UsageError(f"--replay-session: {exc}") from None
    config = resolve(flags, url)
    source: SloSource = "profile" if flags.replay_slo == "profile" else "record"
    slo = config.profile.slo if source == "profile" else recorded_slo
    _refuse_unprobed(slo, config.profile)  # the record's SLO may judge answers this replay does not probe
    plan, first = session.plan(), session.steps[0]
    recorded_seed = session.header.get("seed")
    if flags.seed is None and type(recorded_seed) is int:  # the same prompts as the session, unless --seed
        config = dataclasses.replace(config, seed=recorded_seed, seed_source="given")
    config = dataclasses.replace(
        config,
        plan=plan,
        mode=plan.mode,
        level=first.level if plan.mode == "open" else int(plan.levels[0]),
        rate_rps=plan.levels[0],
        arrival=arrival,
        burstiness=burstiness,
        warmup_s=plan.warmup_s,
        slo=slo,
        find_max=None,
        replay_of=session.replay_of(),
    )
    keyed = sum(1 for s in session.steps if s.ended_by not in ("plan", "precision", "decided"))
    say(
        f"ramp: replaying {len(session.steps)} steps of {session.path} ({plan.mode} loop, "
        f"{sum(plan.step_seconds):.0f} s of steps, {keyed} ended by a key or a stop, "
        f"{session.commands} commands{', the SLA search' if session.searched else ''}); seed {config.seed}; "
        f"SLO from the {source}: {slo_text(slo)}\n"
    )
    if session.header.get("profile_hash") not in (None, config.profile.content_hash):
        say(
            f"ramp: the record ran profile '{session.header.get('profile')}', this replay runs "
            f"'{config.profile.name}' (another workload): --profile picks the same one\n"
        )
    if not reachable(config):
        return EXIT_UNREACHABLE
    outcome = run_face(config, flags.metrics_host, flags.metrics_port, flags.headless)
    code = finish(outcome, config)
    if outcome is None or code not in (EXIT_OK, EXIT_SLO):
        return code
    held, line = gate(session.judged(slo, source), outcome.steps)
    say(f"ramp: replay: {line}\n")
    if held is None:
        return code
    return EXIT_OK if held else EXIT_SLO
