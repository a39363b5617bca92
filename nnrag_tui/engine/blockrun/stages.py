"""The stages that run a block file in the sandbox's child: import it, instantiate its class
with guessed arguments (``arguments``), run its forward on probe inputs (``inputs``). Each
stage takes the job and the state the earlier ones left and returns a detail for the report,
or raises ``StageFailed``. Runs in the sandbox: the standard library and torch only."""

from __future__ import annotations

import importlib.util
import inspect
import sys
import time

from .arguments import (
    SEQ_LEVELS,
    SIZES,
    GuessedConfig,
    NoGuess,
    amend_arguments,
    call_site_candidates,
    guess_arguments,
    wants_sequence,
    with_documented_types,
)
from .errors import StageFailed, describe, safe_str
from .inputs import (
    MAX_PROBES,
    add_step_probes,
    forward_required,
    forward_variants,
    not_about_shapes,
    optional_input,
    probe_inputs,
    probe_tensor,
)

MODULE_NAME = "nnrag_block"  # the block's module, in sys.modules (dataclasses look it up)


# -- import ------------------------------------------------------------------------------------
def stage_import(job: dict, state: dict) -> dict:
    path = state["file"]
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = mod  # dataclasses and pickling look modules up here
    code = state.get("code_object")
    if isinstance(code, list):  # the file's chunks, compiled by the compile stage, in order
        namespace = mod.__dict__
        for part, restore_doc in code:
            doc = namespace.get("__doc__")
            exec(part, namespace)  # noqa: S102
            if restore_doc:  # a string opening a later chunk is no module docstring
                namespace["__doc__"] = doc
    elif code is not None:  # compiled by the compile stage from this very file
        exec(code, mod.__dict__)  # noqa: S102
    else:
        spec.loader.exec_module(mod)
    state["module"] = mod
    return {}


# -- instantiate -------------------------------------------------------------------------------
def _target(job: dict, state: dict):
    mod = state["module"]
    name = job.get("name")
    if name and hasattr(mod, name):
        return getattr(mod, name)
    exported = getattr(mod, "__all__", None)
    if name:
        raise StageFailed({"type": "NameError", "name": name,
                           "message": f"the file defines no {name!r} at module level",
                           "frames": []}, {})
    if exported:
        return getattr(mod, exported[0])
    raise StageFailed({"type": "LookupError", "message": "no class to instantiate "
                       "(no name given and no __all__)", "frames": []}, {})


def stage_instantiate(job: dict, state: dict) -> dict:
    from torch import nn

    cls = _target(job, state)
    if not isinstance(cls, type):
        raise StageFailed({"type": "TypeError", "message": f"{job.get('name')} is not a "
                           f"class", "frames": []}, {})
    try:
        sig = inspect.signature(cls)
        params = with_documented_types(cls, list(sig.parameters.values()))
    except (TypeError, ValueError):
        params = []
    required = [p for p in params if p.default is inspect.Parameter.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    attempts: list[dict] = []
    budget = float(job.get("timeouts", {}).get("instantiate", 10.0)) * 0.6
    t0 = time.perf_counter()
    candidates: list[tuple[tuple, dict, dict, dict]] = []
    if job.get("call_sites"):
        # the caller's guesses failed: the arguments the corpus itself passes, evaluated in
        # the block's module (see engine.callsites)
        candidates = call_site_candidates(job["call_sites"], params, required,
                                          vars(state["module"]))
        if not candidates:
            raise StageFailed({"type": "NeedsArguments", "message": "none of the "
                               f"{len(job['call_sites'])} argument sets seen in the corpus "
                               "could be evaluated in the file", "frames": []},
                              {"required": [p.name for p in required]})
    elif not required:
        candidates.append(((), {}, {}, {"C": None}))
    else:
        seen = set()
        # scalars first; then sequences where a scalar was refused ("'int' object is not
        # subscriptable", "depth needs to be tuple"): sizes alone (input_resolution=(16, 16)
        # beside dim=64), then the per-stage counts alone (depth=(1, 1, 1, 1)), then every
        # integer
        # a parameter annotated with a config class: an instance of it first, then the
        # guessed stand-in
        namespace = vars(state["module"])
        unguessed: str | None = None
        for seq in SEQ_LEVELS:
            for c in SIZES:
                for real in (True, False):
                    try:
                        args, kwargs, shown = guess_arguments(required, c, seq, namespace, real)
                    except NoGuess as exc:
                        unguessed = unguessed or exc.args[0]
                        continue
                    except (MemoryError, KeyboardInterrupt, SystemExit):
                        raise
                    except Exception:  # noqa: BLE001  (the config class refused its guesses)
                        continue
                    key = repr(shown)
                    if key not in seen:
                        seen.add(key)
                        candidates.append((args, kwargs, shown, {"C": c, "seq": seq}))
        if not candidates:
            raise StageFailed({"type": "NeedsArguments",
                               "message": f"cannot infer a value for parameter {unguessed!r}"
                               if unguessed else "no guess of the arguments could be made",
                               "param": unguessed, "frames": []},
                              {"required": [p.name for p in required]})
    last_exc: BaseException | None = None
    wants_seq = False
    i = 0
    while i < len(candidates):
        args, kwargs, shown, hints = candidates[i]
        i += 1
        if attempts and time.perf_counter() - t0 > budget:
            break
        if hints.get("seq") and not wants_seq:
            continue
        try:
            obj = cls(*args, **kwargs)
        except (MemoryError, KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001
            last_exc = exc
            attempts.append({"args": shown, "error": f"{type(exc).__name__}: "
                                                      f"{safe_str(exc, 300)}"})
            wants_seq = wants_seq or wants_sequence(exc)
            # keywords passed on to a base or a layer that misses some: tried next, with them
            more = amend_arguments(exc, cls, params, args, kwargs, shown,
                                   hints.get("C") or SIZES[0])
            if more is not None:
                candidates.insert(i, (*more, hints))
            continue
        for k, v in kwargs.items():
            if isinstance(v, GuessedConfig):
                shown[k] = repr(v)  # the fields the block read, with their guesses
        state["instance"] = obj
        state["hints"] = hints
        state["ctor"] = shown
        detail = {"args": shown, "attempts": len(attempts) + 1,
                  "required": [p.name for p in required]}
        if hints.get("call_site"):
            detail["call_site"] = hints["call_site"]
        if isinstance(obj, nn.Module):
            try:
                detail["parameters"] = sum(p.numel() for p in obj.parameters())
            except Exception:  # noqa: BLE001
                pass
        else:
            detail["not_a_module"] = type(obj).__name__
        return detail
    assert last_exc is not None
    err = describe(last_exc)
    err["required"] = [p.name for p in required]
    raise StageFailed(err, {"attempts": attempts, "required": [p.name for p in required]})


# -- forward -----------------------------------------------------------------------------------
def stage_forward(job: dict, state: dict) -> dict:
    import torch
    from torch import nn

    module = state["instance"]
    if not callable(module):
        raise StageFailed({"type": "NotCallable", "message": f"a {type(module).__name__} "
                           "instance is not callable: not a module", "frames": []}, {})
    required = forward_required(module)
    if isinstance(module, nn.Module):
        try:
            module.eval()
        except Exception:  # noqa: BLE001
            pass
    attempts: list[dict] = []
    budget = float(job.get("timeouts", {}).get("forward", 10.0)) * 0.6
    t0 = time.perf_counter()
    if not required:
        probes = [("none", (), 0)]
        required = optional_input(module)
        if required:  # no arguments first; then the probes, as the first parameter
            probes += probe_inputs(state, module, nn)[:MAX_PROBES]
    else:
        probes = probe_inputs(state, module, nn)[:MAX_PROBES]
    first_exc = None
    for kind, shape, c in probes:  # add_step_probes may append to it
        if attempts and time.perf_counter() - t0 > budget:
            break
        if kind == "none":
            variants: list[list] = [[]]
        else:
            variants = forward_variants(required, probe_tensor(kind, shape, c, torch), kind,
                                        torch)
        for a in variants:
            try:
                with torch.no_grad():
                    out = module(*a)
            except (MemoryError, KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # noqa: BLE001
                first_exc = first_exc or exc  # the most plausible input's error is reported
                attempts.append({"input": list(shape), "error": f"{type(exc).__name__}: "
                                                                f"{safe_str(exc, 300)}"})
                if not_about_shapes(exc) and kind != "none":
                    raise StageFailed(describe(exc), {"attempts": attempts,
                                                      "probes": len(attempts)}) from None
                add_step_probes(probes, (kind, shape, c), exc)
                continue
            return {"input": [list(shape)] if shape else [], "input_kind": kind,
                    "args": len(a), "output": out_shapes(out, torch),
                    "attempts": len(attempts) + 1}
    if first_exc is None:
        raise StageFailed({"type": "ProbeShape", "message": "no probe input to try",
                           "frames": []}, {"attempts": attempts})
    err = describe(first_exc)
    raise StageFailed(err, {"attempts": attempts, "probes": len(attempts)})


def out_shapes(out, torch, depth: int = 0) -> list:
    if isinstance(out, torch.Tensor):
        return [list(out.shape)]
    if depth > 3:
        return []
    res: list = []
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        for o in out[:8]:
            res.extend(out_shapes(o, torch, depth + 1))
    return res[:8]


STAGES = {"import": stage_import, "instantiate": stage_instantiate, "forward": stage_forward}
