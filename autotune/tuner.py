"""The tuning loop: one Optuna study per (op, dtypes, shape, params, target), resumable.

Stages, each narrow: the space samples a schedule; the worker compiles it, checks it against the
NumPy reference and times it interleaved with the current best; Optuna records the result. The
default schedule and Halide's autoschedulers are measured first and stored in the study as
completed trials (without knob values), so the result is never worse than the best of them. At the
end the top candidates, the baselines and the peers users would run instead (NumPy's fast form and
PyTorch eager under both OpenMP wait policies, as ``pypto bench`` times them) are re-measured side
by side with the fair protocol, and the winner goes to the schedule database only if it beats the
entry already there and the default by more than the measured spread (``verdict.py``: re-measured
with more rounds while the intervals overlap).

With no exact entry for the tuned shape, what lookup would pick there (the nearest entry) is timed
in that final table too, as ``nearest``. If it loses to the default by more than the spread, and
it lives in the database this run writes (never the shipped one), it gets a ``slower_at`` record
for this shape (``record_slower``), so calls stop picking it here.

``--trials`` counts search trials that reached a verdict (``finished_trials``); a trial cut short
by a kill or Ctrl-C is queued again, and queued trials left once the budget is met are dropped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import socket
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import optuna

from pypto.compiler import targets
from pypto.compiler.lower import build, fingerprint
from pypto.database import DirectoryDatabase, Entry, Key, provenance
from pypto.database.lookup import SHIPPED, distance, lookup, record_slower, write_root
from pypto.database.tools import cannot_run_here
from pypto.errors import PyptoError, TargetError
from pypto.infra.inputs import check_size
from pypto.infra.inputs import complete_dims
from pypto.ops._load import resolve_op
from pypto.schedule.defaults import default_schedule
from pypto.schedule.schedule import Schedule

from .evaluate import Evaluator, Result
from .space import FixedPoint, space_for, template_seed
from .storage import opening, storage_url
from .verdict import Verdict, decide, store_winner, timing_for

AUTOSCHEDULERS = ("adams2019", "mullapudi2016", "li2018")
SAMPLERS = ("tpe", "cmaes", "gp", "random")
PRUNE_FLOOR_MS = 2.0


class CandidateFailed(Exception):
    """A trial whose schedule failed (compile, run, check, crash, timeout): a result, not a bug."""


@dataclasses.dataclass
class TuneConfig:
    op: str
    shape: Mapping[str, int]
    dtypes: tuple[str, ...] | None = None
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    target: str = "host"
    trials: int = 50
    timeout_s: float | None = None
    storage: str | None = None
    db: str | None = None        # None: the user database (pypto.database.lookup.write_root)
    sampler: str = "tpe"
    seed: int | None = 0
    baselines: tuple[str, ...] = ("default",) + AUTOSCHEDULERS
    prune_factor: float = 5.0
    compile_timeout: float = 120.0
    run_timeout: float = 60.0
    autoschedule_timeout: float = 600.0
    top_k: int = 3
    write_db: bool = True
    progress: bool = True
    heartbeat_interval: int = 5
    grace_period: int = 20
    inject: Callable[[int], str | None] | None = None  # tests only: fault per trial number
    evaluator: Callable[..., Any] = Evaluator  # swapped for a fake in deterministic tests


@dataclasses.dataclass
class TuneResult:
    study_name: str
    storage: str
    table: dict[str, dict]       # name -> timing json (final side-by-side run)
    winner: str
    winner_schedule: Schedule
    written: bool
    message: str
    trials: int                  # search trials with a verdict (what --trials counts)
    failures: int                # of those, candidates that failed
    rule: str = ""               # which rule decided what was stored (autotune/verdict.py)


def default_storage() -> str:
    return f"sqlite:///{os.path.abspath('pypto_tune.db')}"


def make_storage(url: str, cfg: TuneConfig) -> optuna.storages.RDBStorage:
    """An RDB storage with heartbeats (so killed trials are failed and retried) and safe engines."""
    url = storage_url(url)
    kwargs: dict[str, Any] = {}
    if url.startswith("sqlite"):
        kwargs = {"connect_args": {"timeout": 300}}
    else:
        kwargs = {"pool_pre_ping": True}
    import sqlalchemy.exc

    def create():
        for attempt in range(6):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # heartbeats are marked experimental in Optuna
                    return optuna.storages.RDBStorage(
                        url, engine_kwargs=kwargs, heartbeat_interval=cfg.heartbeat_interval,
                        grace_period=cfg.grace_period,
                        heartbeat_stale_trial_callback=optuna.storages.RetryFailedTrialCallback(
                            max_retry=1))
            except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
                # Two tuners creating the tables of a new database at once: the loser retries.
                if attempt == 5:
                    raise
                time.sleep(0.5 + attempt)
        raise AssertionError("unreachable")

    return opening(url, create)


def make_sampler(name: str, seed: int | None, n_startup: int = 10):
    if name == "tpe":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # multivariate TPE is marked experimental
            return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True,
                                              n_startup_trials=n_startup)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed)
    if name == "gp":
        try:
            import torch  # noqa: F401  (GPSampler needs it)
        except ImportError:
            raise PyptoError("--sampler gp needs PyTorch (pip install 'pypto-halide[torch]')") from None
        return optuna.samplers.GPSampler(seed=seed)
    raise PyptoError(f"unknown sampler {name!r}; choose one of {', '.join(SAMPLERS)}")


def study_name(op, dtypes, dims, params, family, fp) -> str:
    shape = ",".join(f"{k}={v}" for k, v in sorted(dims.items()))
    ps = ",".join(f"{k}={v}" for k, v in sorted(params.items()))
    return f"{op}|{'/'.join(dtypes)}|{shape}|{ps}|{family}|{fp}"


def _hash(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


class Tuner:
    """Tunes one op at one shape; see the module docstring."""

    def __init__(self, cfg: TuneConfig, *, say: Callable[[str], None] = print):
        self.cfg = cfg
        self.say = say
        self.op = resolve_op(cfg.op)
        if hasattr(self.op, "specialize"):
            # A composite op: trace it at this shape into one graph op, written as data so that
            # the workers rebuild the same program (`graph:PATH`).
            from pypto.frontend import serial

            gop = self.op.specialize(dict(cfg.shape), cfg.dtypes, dict(cfg.params))
            cfg = self.cfg = dataclasses.replace(
                cfg, op=serial.save(gop.graph, name=gop.name), params={},
                shape={d: gop.call_dims[d] for d in gop.input_dims}, dtypes=gop.dtypes[0])
            self.op = gop
        if hasattr(self.op, "unfused_schedule") and "unfused" not in cfg.baselines:
            cfg = self.cfg = dataclasses.replace(cfg, baselines=tuple(cfg.baselines) + ("unfused",))
        self.dtypes = tuple(cfg.dtypes) if cfg.dtypes else self.op.dtypes[0]
        if self.dtypes not in self.op.dtypes:
            raise PyptoError(f"{self.op.name}: dtypes {self.dtypes} not supported; "
                             f"choose one of {self.op.dtypes}")
        self.params = self.op.resolve_params(dict(cfg.params))
        self.dims = complete_dims(self.op, cfg.shape, self.params)
        self.target = targets.parse(cfg.target)
        if self.target.has_gpu_feature() and not _can_run(self.target):
            raise TargetError(f"cannot measure on {cfg.target}: this machine has no such device. "
                              f"Tune on a machine that has one; `pypto build --target {cfg.target}` "
                              "still works here with stored or default schedules")
        why = cannot_run_here(self.target)
        if why:
            raise TargetError(f"cannot measure on {cfg.target}: candidates run on this machine "
                              f"({targets.host()}), which {why}. Tune on a machine of that kind; "
                              f"`pypto build --target {cfg.target}` still works here with stored "
                              "or default schedules")
        self.family = targets.family(self.target)
        self.built = build(self.op, self.dtypes, self.params)
        self.fp = fingerprint(self.built)
        self.key_dims = {d: self.dims[d] for d in self.op.input_dims}
        check_size(self.op, self.dtypes, self.dims)    # before any worker starts
        self.name = study_name(self.op.name, self.dtypes, self.key_dims, self.params, self.family, self.fp)
        self.storage_url = cfg.storage or default_storage()
        self.failures = 0

    # -- pieces -------------------------------------------------------------------------------
    def _space(self):
        return space_for(build(self.op, self.dtypes, self.params), self.dims, self.target)

    def _incumbent(self, study) -> tuple[dict | None, float | None]:
        """The best completed trial's schedule and value (trials without a usable schedule,
        such as one another tool added to the study, are passed over)."""
        done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        best = min((t for t in done if trial_schedule(t) is not None), key=lambda t: t.value,
                   default=None)
        return (None, None) if best is None else (trial_schedule(best), best.value)

    def _add_baselines(self, study, ev: Evaluator) -> None:
        have = {t.user_attrs.get("baseline") for t in study.get_trials(deepcopy=False)}
        for name in self.cfg.baselines:
            if name in have:
                continue
            if name == "default":
                sched = default_schedule(build(self.op, self.dtypes, self.params), self.dims,
                                         self.target).with_fingerprint(self.fp).to_json()
                why = ""
            elif name == "unfused":
                # A traced program run as its ops would run one by one: each result at root
                # with its own schedule. Beating it is the never-worse-than-unfused rule.
                if not hasattr(self.op, "unfused_schedule"):
                    continue
                sched = self.op.unfused_schedule(self.dims, self.target).with_fingerprint(
                    self.fp).to_json()
                why = ""
            else:
                self.say(f"running Halide's {name} autoscheduler ...")
                sched, why = ev.autoschedule(name, self.cfg.autoschedule_timeout)
            attrs = {"baseline": name}
            if sched is None:
                study.add_trial(optuna.trial.create_trial(
                    state=optuna.trial.TrialState.FAIL, user_attrs={**attrs, "error": why}))
                self.say(f"baseline {name}: failed ({why[:200]})")
                continue
            inc, inc_val = self._incumbent(study)
            r = ev.evaluate(sched, incumbent=inc, timing={"budget_s": 10})
            attrs.update(schedule=json.dumps(sched), status=r.status, hash=_hash(sched))
            if r.ok:
                study.add_trial(optuna.trial.create_trial(
                    value=self._normalize(r, inc_val), user_attrs={**attrs, "raw_ms": r.time_ms}))
                self.say(f"baseline {name}: {r.time_ms:.3f} ms")
            else:
                study.add_trial(optuna.trial.create_trial(
                    state=optuna.trial.TrialState.FAIL, user_attrs={**attrs, "error": r.error[:2000]}))
                self.say(f"baseline {name}: {r.status} ({r.error[:200]})")

    @staticmethod
    def _normalize(r: Result, inc_val: float | None) -> float:
        """Candidate time scaled by the drift seen on the incumbent timed beside it.

        The correction is bounded (x0.67..x1.5) so that one noisy incumbent sample cannot crown
        a candidate; the final side-by-side run decides the winner anyway.
        """
        if inc_val is not None and r.incumbent_ms and r.incumbent_ms > 0:
            return r.time_ms * min(1.5, max(0.67, inc_val / r.incumbent_ms))
        return r.time_ms

    def _objective(self, ev: Evaluator, seen: dict[str, float]):
        def objective(trial: optuna.Trial) -> float:
            trial.set_user_attr("owner", _OWNER)
            sched = self._space().sample(trial).with_fingerprint(self.fp).to_json()
            h = _hash(sched)
            trial.set_user_attr("schedule", json.dumps(sched))
            trial.set_user_attr("hash", h)
            if h in seen:
                trial.set_user_attr("status", "duplicate")
                return seen[h]
            inc, inc_val = self._incumbent(trial.study)
            # Stop a candidate whose first run is far slower than the best; never for runs under
            # PRUNE_FLOOR_MS, where one run is mostly noise and a full measurement is cheap.
            prune = max(inc_val * self.cfg.prune_factor, PRUNE_FLOOR_MS) if inc_val else None
            inject = self.cfg.inject(trial.number) if self.cfg.inject else None
            # A candidate far slower than the best is not worth minutes of waiting: its deadline
            # follows the best time (checking, one first run, and a short timing burst).
            limit = max(20.0, inc_val / 1000 * (self.cfg.prune_factor * 4 + 20)) if inc_val else None
            r = ev.evaluate(sched, incumbent=inc, prune_ms=prune, inject=inject, run_timeout=limit)
            trial.set_user_attr("status", r.status)
            if r.compile_s is not None:
                trial.set_user_attr("compile_s", r.compile_s)
            if r.status == "pruned":
                trial.set_user_attr("raw_ms", r.time_ms)
                raise optuna.TrialPruned(f"first run {r.time_ms:.3f} ms > {prune:.3f} ms")
            if not r.ok:
                self.failures += 1
                trial.set_user_attr("error", r.error[:2000])
                raise CandidateFailed(f"{r.status}: {r.error[:300]}")
            value = self._normalize(r, inc_val)
            trial.set_user_attr("raw_ms", r.time_ms)
            seen[h] = value
            return value

        return objective

    def _reap_dead(self, study) -> None:
        """Fails trials left RUNNING by a tuner process of this machine that no longer exists.

        Heartbeats catch those too, but only after their grace period; a user who reruns a killed
        tuner at once should not wait for it. The trial's knob values are queued again.
        """
        host = _OWNER.rsplit(":", 1)[0]
        # Tuners that joined this study. A trial can die before it records its owner (while Optuna
        # samples it); such a trial is dead if every tuner that ever joined was on this machine
        # and none of them is alive.
        tuners = [k.split(":", 1)[1] for k in study.user_attrs if k.startswith("tuner:")]
        all_here_and_dead = all(
            tn.rpartition(":")[0] == host and tn.rpartition(":")[2].isdigit()
            and not _alive(int(tn.rpartition(":")[2])) for tn in tuners)
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            owner = t.user_attrs.get("owner", "")
            h, _, pid = owner.rpartition(":")
            if not owner:
                if not (tuners and all_here_and_dead):
                    continue
                pid = "unknown"
            elif h != host or not pid.isdigit() or _alive(int(pid)):
                continue
            study._storage.set_trial_user_attr(t._trial_id, "error", "tuner process died mid-trial")
            study._storage.set_trial_state_values(t._trial_id, optuna.trial.TrialState.FAIL)
            if t.params:
                study.enqueue_trial(t.params, skip_if_exists=False)
            self.say(f"trial {t.number} was left running by a dead tuner (pid {pid}); failed and queued again")

    def _seed_from_nearest(self, study, storage) -> None:
        """Enqueues the best knob values of the nearest already-tuned shape of this op."""
        if any(t.params for t in study.get_trials(deepcopy=False)):
            return
        prefix = f"{self.op.name}|{'/'.join(self.dtypes)}|"
        best = None
        for s in optuna.get_all_study_summaries(storage):
            parts = s.study_name.split("|")
            if s.study_name == self.name or not s.study_name.startswith(prefix) or len(parts) != 6:
                continue
            if parts[3:5] != self.name.split("|")[3:5]:
                continue
            try:
                dims = dict((k, int(v)) for k, v in (p.split("=") for p in parts[2].split(",")))
            except ValueError:
                continue
            d = distance(self.key_dims, dims)
            if math.isfinite(d) and (best is None or d < best[0]):
                best = (d, s.study_name)
        if best is None:
            return
        other = optuna.load_study(study_name=best[1], storage=storage)
        done = [t for t in other.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
                if t.params]
        space = self._space()
        for t in sorted(done, key=lambda t: t.value)[:3]:
            # Projected onto this shape's space: a knob's choices depend on the extents (a split
            # factor of 32 is no choice at 16), and Optuna refuses a fixed value outside them
            # (the run died with "'32' not in (16,)"). A value that is no choice here takes the
            # knob's first.
            point = FixedPoint(t.params)
            try:
                space.sample(point)
            except PyptoError:
                continue
            study.enqueue_trial(point.used, skip_if_exists=True)
        self.say(f"seeded from the nearest tuned shape ({best[1].split('|')[2]}): "
                 f"{min(3, len(done))} configurations")

    # -- the whole run ------------------------------------------------------------------------
    def run_search_only(self) -> None:
        """Joins the study as an extra searcher: no baselines, no final table, no database write."""
        self.run(final=False)

    def run(self, final: bool = True) -> TuneResult | None:
        cfg = self.cfg
        optuna.logging.set_verbosity(optuna.logging.ERROR)  # failed trials are reported by us
        storage = make_storage(self.storage_url, cfg)
        study = optuna.create_study(study_name=self.name, storage=storage, direction="minimize",
                                    sampler=make_sampler(cfg.sampler, cfg.seed), load_if_exists=True)
        for k, v in (("op", self.op.name), ("dims", self.key_dims), ("dtypes", self.dtypes),
                     ("params", self.params), ("target", str(self.target)), ("fingerprint", self.fp)):
            study.set_user_attr(k, v)
        with cfg.evaluator(cfg.op, self.dtypes, self.params, self.dims, cfg.target,
                           compile_timeout=cfg.compile_timeout, run_timeout=cfg.run_timeout) as ev:
            self._reap_dead(study)
            study.set_user_attr(f"tuner:{_OWNER}", time.time())
            if final:
                self._add_baselines(study, ev)
                self._seed_from_nearest(study, storage)
                seed = None if self.target.has_gpu_feature() else template_seed(self.op.name)
                if seed and not any("plan" in t.params for t in study.get_trials(deepcopy=False)):
                    study.enqueue_trial(seed, skip_if_exists=True)
            done = len(finished_trials(study))
            remaining = max(0, cfg.trials - done)
            if done:
                self.say(f"resuming study with {done} trials done; {remaining} to go")
            seen = {t.user_attrs["hash"]: t.value for t in study.get_trials(deepcopy=False)
                    if t.state == optuna.trial.TrialState.COMPLETE and "hash" in t.user_attrs}
            callbacks = [optuna.study.MaxTrialsCallback(
                cfg.trials + len(cfg.baselines) + 64,
                states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED,
                        optuna.trial.TrialState.FAIL))]
            bar = _Progress(study, remaining, cfg.timeout_s, self) if cfg.progress else None
            if bar:
                callbacks.append(bar)
            try:
                if remaining:
                    study.optimize(self._objective(ev, seen), n_trials=remaining, timeout=cfg.timeout_s,
                                   catch=(CandidateFailed,), callbacks=callbacks,
                                   gc_after_trial=False)
            except KeyboardInterrupt:
                self._requeue_interrupted(study)
                raise
            finally:
                if bar:
                    bar.close()
            if final and len(finished_trials(study)) >= cfg.trials:
                self._drop_waiting(study)
            return self._finish(study, ev) if final else None

    def _nearest(self):
        """What lookup would pick for this shape when there is no exact entry: a near entry
        (a ``Found``), or None (the default, or an exact entry in another database)."""
        try:
            found = lookup(self.op, self.fp, self.dtypes, self.params, self.dims, self.target)
        except PyptoError:
            return None
        if found is None or found.distance == 0:
            return None
        return found

    def _judge_nearest(self, found, db, table, remeasure_fn) -> None:
        """Records that the nearest entry ``found`` lost to the default at this shape, when the
        verdict's rule says so and it lives in the database this run writes (never the shipped
        one). The rule is :func:`decide` with the default as the challenger."""
        verdict = decide(table, "default", ["nearest"], remeasure_fn)
        if not verdict.store:
            self.say(f"nearest entry ({found.source}): not slower than the default here")
            return
        where = os.path.realpath(found.database)
        writable = (self.cfg.write_db and where == os.path.realpath(str(db.root))
                    and where != os.path.realpath(str(SHIPPED)))
        if not writable:
            self.say(f"nearest entry ({found.source}) is slower than the default here "
                     f"({verdict.rule}); it lives in a database this run does not write, so "
                     f"nothing is recorded")
            return
        done = record_slower(db, found.entry.key, found.entry.schedule.hash, self.key_dims,
                             time_ms=table["nearest"]["median_ms"], default_ms=table["default"]["median_ms"],
                             method="tune")
        self.say(f"nearest entry ({found.source}) is slower than the default here ({verdict.rule}); "
                 + ("recorded, lookup skips it at this shape now" if done else
                    "it changed meanwhile, nothing recorded"))

    def _requeue_interrupted(self, study) -> None:
        """Queues again the knob values of this tuner's trials cut short by Ctrl-C (Optuna fails
        them), so that a resumed run measures them instead of losing them."""
        trials = study.get_trials(deepcopy=False)
        done = {t.user_attrs.get("requeued_from") for t in trials}
        for t in trials:
            if (t.state == optuna.trial.TrialState.FAIL and t.user_attrs.get("owner") == _OWNER
                    and "status" not in t.user_attrs and t.params and t.number not in done):
                study.enqueue_trial(t.params, user_attrs={"requeued_from": t.number},
                                    skip_if_exists=False)

    def _drop_waiting(self, study) -> None:
        """Fails queued trials left over once the budget is met (a copy queued after a kill, a
        seed never reached), so that none waits in the study forever."""
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)):
            study._storage.set_trial_user_attr(
                t._trial_id, "error", "queued, but --trials was already reached; not run")
            study._storage.set_trial_state_values(t._trial_id, optuna.trial.TrialState.FAIL)
        # (a trial another process popped meanwhile is RUNNING, not WAITING, and is left alone)

    def _finish(self, study, ev: Evaluator) -> TuneResult:
        cfg = self.cfg
        done = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))]
        unusable = [t.number for t in done if trial_schedule(t) is None]
        if unusable:
            self.say(f"left out trial(s) {unusable[:10]}: no schedule recorded (added to the "
                     "study by another tool, or damaged)")
            done = [t for t in done if t.number not in unusable]
        cands: dict[str, dict] = {}
        db = DirectoryDatabase(cfg.db or write_root())
        key = Key.make(self.op.name, self.dtypes, self.key_dims, self.params, self.family, self.fp)
        stored = db.best(key)
        if stored is not None:
            cands["stored"] = stored.schedule.to_json()
        nearest = self._nearest() if stored is None else None
        if nearest is not None:
            cands["nearest"] = nearest.schedule.to_json()
        for t in done:
            if "baseline" in t.user_attrs:
                cands[t.user_attrs["baseline"]] = trial_schedule(t)
        tuned = [t for t in sorted(done, key=lambda t: t.value) if "baseline" not in t.user_attrs]
        hashes = {_hash(dict(s, fingerprint=None)) for s in cands.values()}
        for t in tuned:
            if len([n for n in cands if n.startswith("tuned")]) >= cfg.top_k:
                break
            s = trial_schedule(t)
            h = _hash(dict(s, fingerprint=None))
            if h not in hashes:
                cands[f"tuned#{t.number}"] = s
                hashes.add(h)
        self.say(f"final side-by-side measurement of {len(cands)} schedules and NumPy ...")
        res = ev.compare(cands, numpy=True)
        table = res.get("results", {})
        for n, err in res.get("errors", {}).items():
            self.say(f"  {n}: excluded ({err[:200]})")
        # On a tie the stored entry stays: a rewrite must be earned.
        ranked = sorted((n for n in table if n in cands),  # peers (numpy, torch) are not schedules
                        key=lambda n: (table[n]["median_ms"], n != "stored"))
        if not ranked:
            raise PyptoError(f"{self.op.name}: no schedule could be measured; see the worker log "
                             f"{ev.log_path}")
        winner = ranked[0]
        sched = Schedule.from_json(cands[winner])
        written = False
        if stored is not None and _hash(dict(cands[winner], fingerprint=None)) == _hash(
                dict(cands["stored"], fingerprint=None)):
            winner_is_stored = True
        else:
            winner_is_stored = winner == "stored"
        if winner_is_stored:
            verdict = Verdict(False, "the stored entry measured fastest; it stays")
            message = "the stored entry is still the fastest; database unchanged"
        elif winner == "default" and stored is None:
            # Storing the default as if tuned claimed a result the search did not find (and
            # lookup already falls back to the default): nothing is stored.
            verdict = Verdict(False, "default: measured fastest; nothing stored, calls keep it")
            message = "the default schedule measured fastest; nothing stored (calls keep the default)"
        else:
            def remeasure(names, attempt):
                self.say(f"re-measuring {', '.join(names)} side by side (round {attempt}) ...")
                return ev.compare({n: cands[n] for n in names}, numpy=False,
                                  timing=timing_for(attempt)).get("results")

            verdict = decide(table, winner, ["stored", "default"], remeasure)
            message = "database unchanged (the 'decided' line says why)"
        if nearest is not None and "nearest" in table and "default" in table:
            self._judge_nearest(nearest, db, table, remeasure_fn=lambda names, attempt: ev.compare(
                {n: cands[n] for n in names}, numpy=False, timing=timing_for(attempt)).get("results"))
        if verdict.store and not cfg.write_db:
            message = "not written (--no-write)"
        elif verdict.store:
            base = {n: table[n]["median_ms"] for n in table if n != winner and not n.startswith("tuned")
                    and n not in ("stored", "nearest")}
            forms = {n: table[n]["label"] for n in base if table[n].get("label")}
            entry = Entry(key=key, schedule=sched.with_fingerprint(self.fp),
                          time_ms=table[winner]["median_ms"], baselines=base,
                          provenance=provenance(
                              method="tune" if winner.startswith("tuned") else f"baseline:{winner}",
                              target=str(self.target), trials=len(finished_trials(study)),
                              sampler=cfg.sampler, seed=cfg.seed, study=self.name,
                              baseline_forms=forms,
                              timing="fair protocol (pause where the library changes, untimed call "
                                     "first, rotating); steady-state medians"))
            other = store_winner(db, entry, stored)
            written = other is None
            if hasattr(self.op, "graph"):
                # A program: its graph goes beside the entry, so `pypto db validate --deep`
                # can rebuild and check it (pypto.database.programs).
                from pypto.frontend.serial import write_program

                write_program(db.root, self.op.graph, self.op.name)
            message = (f"stored in {db.path(self.op.name, self.family)}" if written else
                       f"another run stored a faster entry for this key meanwhile "
                       f"({other.time_ms:.3f} ms); kept it")
        done_trials = finished_trials(study)
        # What the final side-by-side run decided, for `pypto study` (the search's own numbers
        # are single-shot timings, and the final run may keep the default).
        study.set_user_attr("outcome", {
            "winner": winner, "winner_ms": table[winner]["median_ms"], "stored": written,
            "default_ms": table.get("default", {}).get("median_ms"), "message": message})
        return TuneResult(study_name=self.name, storage=self.storage_url, table=table, winner=winner,
                          winner_schedule=sched, written=written, message=message,
                          trials=len(done_trials), rule=verdict.rule,
                          failures=sum(t.state == optuna.trial.TrialState.FAIL for t in done_trials))


_OWNER = f"{socket.gethostname()}:{os.getpid()}"


def trial_schedule(trial) -> dict | None:
    """The schedule (JSON object) a trial recorded, or None when it has no usable one: the
    study is shared storage, and a trial another tool added, or a damaged attribute, must not
    stop the run with a KeyError. The schedule itself is checked where it is compiled."""
    from pypto.infra.jsonio import strict_loads

    text = trial.user_attrs.get("schedule")
    if not isinstance(text, str):
        return None
    try:
        obj = strict_loads(text, f"trial {trial.number}'s schedule")
    except PyptoError:
        return None
    return obj if isinstance(obj, dict) else None


def finished_trials(study) -> list:
    """The search trials that count toward ``--trials``: those that reached a verdict.

    A verdict is a measured time (COMPLETE), an early stop as far slower than the best (PRUNED), or
    a failure of the candidate itself (FAIL with a ``status``: compile error, wrong output, crash,
    timeout). A trial cut short because the tuner itself died or was interrupted has no verdict:
    it does not count, and its knob values are queued again. Baselines never count.
    """
    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED,
              optuna.trial.TrialState.FAIL)
    return [t for t in study.get_trials(deepcopy=False, states=states)
            if "baseline" not in t.user_attrs
            and (t.state != optuna.trial.TrialState.FAIL or "status" in t.user_attrs)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _can_run(target) -> bool:
    import halide as hl

    try:
        return bool(hl.host_supports_target_device(target))
    except Exception:
        return False


class _Progress:
    """A progress bar: trials, failures, best, speedup over default and best autoscheduler."""

    def __init__(self, study, total: int, timeout_s, tuner: Tuner):
        from tqdm import tqdm

        self.bar = tqdm(total=total, unit="trial", dynamic_ncols=True, leave=True)
        self.start = time.monotonic()
        self.timeout_s = timeout_s
        self.base = {t.user_attrs["baseline"]: t.value for t in study.get_trials(deepcopy=False)
                     if "baseline" in t.user_attrs and t.value is not None}

    def __call__(self, study, trial) -> None:
        self.bar.update(1)
        fails = sum(t.state == optuna.trial.TrialState.FAIL and "baseline" not in t.user_attrs
                    for t in study.get_trials(deepcopy=False))
        try:
            best = study.best_value
        except ValueError:
            best = None
        post = {"fail": fails}
        if best:
            post["best"] = f"{best:.3f}ms"
            if self.base.get("default"):
                post["vs_default"] = f"{self.base['default'] / best:.2f}x"
            autos = [v for k, v in self.base.items() if k != "default"]
            if autos:
                post["vs_auto"] = f"{min(autos) / best:.2f}x"
        if self.timeout_s:
            post["left"] = f"{max(0, self.timeout_s - (time.monotonic() - self.start)):.0f}s"
        self.bar.set_postfix(post)

    def close(self) -> None:
        self.bar.close()


def format_table(result: TuneResult) -> str:
    """The final comparison as aligned text, fastest first, with ratios to the winner and NumPy."""
    t = result.table
    if not t:
        return "(nothing measured)"
    best = t[result.winner]["median_ms"]
    numpy_ms = t.get("numpy", {}).get("median_ms")
    lines = [f"{'schedule':<22}{'median ms':>12}{'spread':>9}{'vs winner':>11}{'vs numpy':>10}"]
    for n in sorted(t, key=lambda n: t[n]["median_ms"]):
        m = t[n]["median_ms"]
        vs_np = f"{numpy_ms / m:.2f}x" if numpy_ms else "-"
        mark = " *" if n == result.winner else ""
        label = t[n].get("label")    # "numpy (reference)" where the op has no fast NumPy form
        shown = f"{label}{mark}" if isinstance(label, str) and label.startswith(n) else n + mark
        lines.append(f"{shown:<22}{m:>12.3f}{t[n]['spread'] * 100:>8.1f}%{m / best:>10.2f}x{vs_np:>10}")
    if result.rule:
        lines.append(f"decided: {result.rule}")
    return "\n".join(lines)
