/**
 * The exhaustive checker of one attempt's machine (`src/internal/attempt/machine.ts`: the
 * reservation, the execution, the recording and the answer, composed).
 *
 * A model of the runtime around it (`utils/AttemptModel.ts`) runs the machine's commands as the
 * driver does (its inbox, its caller's fiber, its daemon fibers, its alarm) and explores, depth
 * first with a visited set keyed on the whole model state, every ordering of these events:
 *
 * - the downstream ends by itself (a value at 30, 60, 80, 95 or 100 ms, a typed failure, a defect),
 *   hangs but stops at once when interrupted (`Effect.timeout`/`race` inside it), finishes an
 *   uninterruptible region (at 50, 105, 170 or 330 ms; interrupted meanwhile, it ends interrupted),
 *   runs a finalizer 5, 30 or 100 ms after its interruption, never stops, or cannot be built;
 * - every store call (reserve, give-back, extend, the writes) answers at once, slowly (15 ms), fails,
 *   dies, hangs, answers exactly as the machine gives up on it (its late answer still posted), or is
 *   applied and then fails; a reservation is also slow and uninterruptible, or finds a record
 *   (a conflict, a replay, another request, an unknown outcome);
 * - the success's encoder is synchronous, does not encode, or is an effect (at once, slow, hanging,
 *   late); the failure's encoder likewise; the failure policy's callback may throw;
 * - the caller is interrupted once, at any event or 5 ms after one: while a reservation is in
 *   flight, while waiting on a conflict, while giving back, while the downstream runs or stops, while
 *   recording;
 * - a second attempt reserves as soon as the store lets it (the first's lease ended, or its record
 *   released or marked failed), or at any later step;
 * - `Tick`s at `wakeAt` (and a stale alarm's), every event due at one instant in every order, with
 *   and without a heartbeat (60 ms, lease 100), a deadline (150: the downstream must end by 110),
 *   `waitOnConflict` (30 ms, twice), under each failure, timeout and defect policy;
 * - `maxHold` (200 ms, or the shortest the settings accept, 140): a downstream that never stops, that
 *   outlives it, that ends as it passes, or whose finalizer outlasts it, under each timeout policy.
 *
 * Bounds: at most 3 faults (any answer but an immediate one) per run, one caller interruption, one
 * second attempt, a horizon of 400 ms (a downstream that never stops is followed that long).
 *
 * Checked at every step (the README's "Policies" and "Every exit, and what a retry gets"):
 *
 * 1. the downstream starts only on a reservation the attempt holds, once;
 * 2. the machine never answers while its downstream has not ended (a downstream that never stops
 *    is never answered), nor with a write or an encoder in flight; nothing follows the answer, and
 *    no late answer starts anything after it;
 * 3. an interruptible downstream never runs past its deadline, its lease, a lost lease or its
 *    interrupted caller: it is interrupted at once;
 * 4. the lease of a downstream that has not stopped is kept on a healthy store, so a second attempt
 *    can never reserve beside it (only a store that failed, died, hung or answered late lets it);
 * 5. a known outcome (a value that encodes, a failure chosen for `store`) is recorded on a healthy
 *    store;
 * 6. the answer comes by the deadline, or the margin after the end of a downstream that could not
 *    be stopped; without a deadline, by the lease held when the downstream ended;
 * 7. a reservation that may have been applied, when nothing ran (the reserve failed, died or was
 *    cut off, the caller was interrupted during it, the downstream could not be built, no time was
 *    left) is given back, and is not left blocked unless the store failed the give-back;
 * 8. `wakeAt` is never in the past unless a `Tick` makes progress (the driver would spin);
 * 9. every answer, and the write before it, is one the exit table allows for that exit and policy;
 * 10. `step` never throws on an event the runtime can deliver in that state (late answers);
 * 11. maxHold: no extension is sent from it, the attempt does not execute past it, and the downstream
 *     let go then (told to stop, still running) gets its timeout policy on a healthy store (`keepLease`:
 *     the record kept, its lease ending by maxHold and one lease; `release`: deleted; `markUnknown`:
 *     marked unknown); under `markUnknown` no retry can ever reserve beside it, under the other two one
 *     may (the trade maxHold makes), and only then.
 *
 * The mutation checks at the end run the model on mutated machines (wrapping `Machine.step`) and
 * expect the rule each mutation breaks to be reported.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Machine from "../src/internal/attempt/machine.js"
import type { Plan, Report, Scenario, StepFn } from "./utils/AttemptModel.js"
import {
  baseScenario,
  check,
  describeScenario,
  emptyReport,
  fixedOf,
  HORIZON,
  MAX_FAULTS,
  scenarios,
  VALUE
} from "./utils/AttemptModel.js"

const summary = (report: Report): string =>
  [
    `${report.scenarios} scenarios, ${report.states} states, ${report.orderings} orderings, ` +
    `${report.coverage.size} (state phase, event) pairs`,
    `answers: ${JSON.stringify(Object.fromEntries([...report.answers].sort()))}`,
    `unanswered (allowed): ${JSON.stringify(Object.fromEntries(report.unanswered))}`,
    `notes: ${JSON.stringify(Object.fromEntries(report.noted))}`,
    `let go at maxHold: ${JSON.stringify(Object.fromEntries([...report.letGo].sort()))}`,
    `violations: ${report.violated} ${JSON.stringify(Object.fromEntries(report.rules))}`
  ].join("\n")

const explore = async (all: ReadonlyArray<Scenario>, options: Parameters<typeof check>[2] = {}): Promise<Report> => {
  const report = emptyReport()
  for (const scenario of all) {
    check(scenario, report, options)
    // lets the test runner's messages through between scenarios
    await new Promise((resolve) => setImmediate(resolve))
  }
  return report
}

describe("the attempt's machine, in the model of its runtime", () => {
  it("keeps every rule over every ordering of its events up to the bounds", async () => {
    const started = Date.now()
    const report = await explore(scenarios())
    console.log(
      `attempt machine (faults ≤ ${MAX_FAULTS}, horizon ${HORIZON} ms, ${Date.now() - started} ms):\n${summary(report)}`
    )
    for (const { text } of report.notes.values()) console.log(`note: ${text}`)
    for (const { text } of report.violations.values()) console.log(`VIOLATION: ${text}`)
    // every event met each phase it can meet
    const phases = new Set([...report.coverage].map((pair) => pair.split(": ")[0]!))
    for (
      const phase of [
        "Reserving.Reserving",
        "Reserving.Waiting",
        "Reserving.GivingBack",
        "Executing.running",
        "Executing.timeout",
        "Executing.leaseExpiring",
        "Executing.leaseLost",
        "Executing.callerInterrupted",
        "Recording.Encoding",
        "Recording.EncodingFailure",
        "Recording.Choosing",
        "Recording.Writing"
      ]
    ) {
      assert.isTrue(phases.has(phase), phase)
    }
    // every kind of answer was reached
    for (
      const answer of [
        "value:recorded",
        "value:unrecorded",
        "found:Conflict",
        "found:Replay",
        "found:KeyReused",
        "found:Unknown",
        "fail:StoreUnavailable",
        "fail:StoreError",
        "fail:OutcomeNotReplayable",
        "fail:error",
        "die:downstream",
        "die:policy",
        "die:construction",
        "fail:DownstreamTimeout:keepLease:t",
        "fail:DownstreamTimeout:release:t",
        "fail:DownstreamTimeout:markUnknown:t",
        "fail:DownstreamTimeout:release:0",
        "fail:LeaseLost:superseded",
        "fail:LeaseLost:expiring",
        "fail:CleanupFailed:store:error",
        "fail:CleanupFailed:release:DownstreamTimeout",
        "interrupted"
      ]
    ) {
      assert.isAbove(report.answers.get(answer) ?? 0, 0, answer)
    }
    // a downstream let go at maxHold got each timeout policy, on a healthy store
    for (
      const letGo of [
        "keepLease fail:DownstreamTimeout:keepLease:t A:IN_PROGRESS",
        "release fail:DownstreamTimeout:release:t absent",
        "markUnknown fail:DownstreamTimeout:markUnknown:t A:COMPLETED:Timeout"
      ]
    ) {
      assert.isAbove(report.letGo.get(letGo) ?? 0, 0, letGo)
    }
    assert.deepStrictEqual([...report.rules.keys()], [], "rules broken (see the log for the shortest ordering of each)")
  }, 900_000)
})

/** One plan of the model: each call's behaviour by kind and index (`now` when not listed). */
const plan = (
  behaviours: Partial<Record<string, ReadonlyArray<string>>>,
  times: { readonly callerAt?: number; readonly secondAt?: number } = {}
): Plan => ({
  behaviour: (kind, index) => (behaviours[kind]?.[index] ?? "now") as never,
  ...times
})

const base = baseScenario

describe("the defects the checker found, each on its shortest ordering", () => {
  it("a late answer of an encoder given up on makes `step` throw", () => {
    // the effectful encoder's answer is posted at the instant the machine gives up on it (the
    // alarm's Tick first): the recording is writing the value as omitted when `Encoded` comes
    const fixed = fixedOf({ ...base, encoder: "effectful" })
    let [state] = Machine.start(fixed)
    ;[state] = Machine.step(fixed, state, { _tag: "Reserved", attempt: 1, sentAt: 0 }, 0)
    ;[state] = Machine.step(fixed, state, { _tag: "DownstreamEnded", ended: { _tag: "Succeeded", value: VALUE } }, 30)
    const until = state._tag === "Recording" && state.recording._tag === "Encoding" ? state.recording.until : NaN
    ;[state] = Machine.step(fixed, state, { _tag: "Tick" }, until)
    assert.strictEqual(state._tag === "Recording" ? state.recording._tag : state._tag, "Writing")
    const late = () => Machine.step(fixed, state, { _tag: "Encoded", json: JSON.stringify(VALUE), value: VALUE }, until)
    assert.doesNotThrow(late, undefined, undefined, "Encoded, late, while Writing")
    // the same for a failure's encoder
    const failing = fixedOf({ ...base, downstream: { _tag: "Ends", after: 30, exit: "failure" } })
    let [s] = Machine.start(failing)
    ;[s] = Machine.step(failing, s, { _tag: "Reserved", attempt: 1, sentAt: 0 }, 0)
    ;[s] = Machine.step(failing, s, {
      _tag: "DownstreamEnded",
      ended: { _tag: "Failed", error: "rejected", cause: Cause.fail("rejected") }
    }, 30)
    ;[s] = Machine.step(failing, s, { _tag: "Chosen", policy: "store" }, 30)
    const at = s._tag === "Recording" && s.recording._tag === "EncodingFailure" ? s.recording.until : NaN
    ;[s] = Machine.step(failing, s, { _tag: "Tick" }, at)
    assert.doesNotThrow(
      () =>
        Machine.step(failing, s, {
          _tag: "FailureEncoded",
          outcome: { _tag: "Failure", error: "\"rejected\"" } as never
        }, at),
      undefined,
      undefined,
      "FailureEncoded, late, while Writing"
    )
  })

  it("a caller interrupted while a reservation is given back leaves it blocked", () => {
    // the reservation was applied and its answer lost; its give-back (a release that takes 15 ms)
    // runs in a child fiber of the caller's (the `timeoutFail` that bounds it), which the caller's
    // interruption interrupts at once: nothing ran, yet the key stays blocked for the lease (for
    // the record's life under markUnknown: a retry after the lease gets DownstreamTimeout)
    const report = emptyReport()
    check(base, report, { plan: plan({ reserve: ["appliedFails"], giveBack: ["slow"] }, { callerAt: 5 }) })
    for (const { text } of report.violations.values()) console.log(text)
    assert.deepStrictEqual([...report.rules.keys()], [])
  })
})

// ---------------------------------------------------------------------------------------------------
// mutation checks: a machine that breaks a rule must be caught
// ---------------------------------------------------------------------------------------------------

/** No extension once the downstream was told to stop (no `STOP_GRACE_MILLIS`, no winding down). */
const noWindingDownExtension: StepFn = (fixed, state, event, now) => {
  const [next, commands] = Machine.step(fixed, state, event, now)
  if (next._tag !== "Executing" || !next.execution.interrupted) return [next, commands]
  const kept = commands.filter((c) => c._tag !== "Extend")
  if (kept.length === commands.length) return [next, commands]
  return [{ ...next, execution: { ...next.execution, extension: undefined, retryAt: Infinity } }, kept]
}

/** No give-back: what may be reserved is left as it is. */
const noGiveBack: StepFn = (fixed, state, event, now) => {
  const [next, commands] = Machine.step(fixed, state, event, now)
  return commands.some((c) => c._tag === "GiveBack")
    ? Machine.step(fixed, next, { _tag: "GivenBack" }, now)
    : [next, commands]
}

/** The downstream is never interrupted. */
const noInterrupt: StepFn = (fixed, state, event, now) => {
  const [next, commands] = Machine.step(fixed, state, event, now)
  return [next, commands.filter((c) => c._tag !== "Interrupt")]
}

/** The caller's interruption is answered at once, without waiting for the downstream's end. */
const answerAtOnce: StepFn = (fixed, state, event, now) => {
  if (state._tag === "Executing" && event._tag === "CallerInterrupted") {
    const answer: Machine.Answer = { _tag: "Interrupted" }
    return [{ _tag: "Answered", answer }, [{ _tag: "Interrupt" }, { _tag: "Answer", answer }]]
  }
  return Machine.step(fixed, state, event, now)
}

/** A value's completion is dropped: the value is answered unrecorded. */
const dropCompletion: StepFn = (fixed, state, event, now) => {
  const [next, commands] = Machine.step(fixed, state, event, now)
  const write = commands.find((c) => c._tag === "Write")
  if (write?._tag !== "Write" || write.write._tag !== "Complete" || write.write.outcome._tag !== "Success") {
    return [next, commands]
  }
  return Machine.step(fixed, next, { _tag: "WriteFailed", error: { _tag: "StoreUnavailable" } as never }, now)
}

/** A recording past its bound is not given up on (its wake-up stays in the past). */
const neverGiveUp: StepFn = (fixed, state, event, now) =>
  state._tag === "Recording" && event._tag === "Tick" ? [state, []] : Machine.step(fixed, state, event, now)

/** A write refused by another attempt's token counts as written. */
const ignoreFencing: StepFn = (fixed, state, event, now) =>
  state._tag === "Recording" && event._tag === "WriteFailed" && event.error._tag === "LeaseLost"
    ? Machine.step(fixed, state, { _tag: "Written" }, now)
    : Machine.step(fixed, state, event, now)

/** The recording bounded by the lease only (`recordEnd` without the attempt's deadline). */
const leaseBoundOnly: StepFn = (fixed, state, event, now) =>
  state._tag === "Executing" && event._tag === "DownstreamEnded"
    ? Machine.step(fixed, { ...state, times: { ...state.times, attemptDeadline: Infinity } }, event, now)
    : Machine.step(fixed, state, event, now)

/** maxHold read 50 ms late: the attempt extends and executes past it. */
const lateHold: StepFn = (fixed, state, event, now) =>
  Machine.step({ ...fixed, maxHoldMs: fixed.maxHoldMs + 50 }, state, event, now)

/** At maxHold the downstream is let go with no policy: nothing is written, whatever `onTimeout` says. */
const noPolicyAtHold: StepFn = (fixed, state, event, now) => {
  const [next, commands] = Machine.step(fixed, state, event, now)
  if (state._tag !== "Executing" || next._tag === "Executing" || event._tag === "DownstreamEnded") {
    return [next, commands]
  }
  const answer: Machine.Answer = { _tag: "Fail", cause: Cause.fail("let go") }
  return [{ _tag: "Answered", answer }, [...commands.filter((c) => c._tag === "Interrupt"), { _tag: "Answer", answer }]]
}

describe("mutation checks: the checker catches a machine that breaks a rule", () => {
  const some = (predicate: (s: Scenario) => boolean) => scenarios().filter(predicate)
  const mutations: ReadonlyArray<readonly [string, StepFn, ReadonlyArray<Scenario>, string]> = [
    [
      "no extension while the downstream winds down",
      noWindingDownExtension,
      some((s) => s.downstream._tag === "Stubborn" && !s.heartbeat),
      "the lease of a downstream that has not stopped ran out on a healthy store"
    ],
    [
      "no give-back",
      noGiveBack,
      some((s) => s.downstream._tag === "NotStarted"),
      "a reservation that may be applied was not given back"
    ],
    [
      "no interruption",
      noInterrupt,
      some((s) => s.downstream._tag === "Hangs" && !s.heartbeat),
      "an interruptible downstream ran past its deadline"
    ],
    [
      "the caller's interruption answered at once",
      answerAtOnce,
      some((s) => s.downstream._tag === "Cleanup" && !s.heartbeat),
      "the machine answered while its downstream runs"
    ],
    [
      "the completion dropped",
      dropCompletion,
      some((s) => s.downstream._tag === "Ends" && s.downstream.exit === "value" && s.encoder === "sync"),
      "a known outcome was not recorded on a healthy store"
    ],
    [
      "a recording past its bound never given up on",
      neverGiveUp,
      some((s) => s.downstream._tag === "Ends" && s.downstream.exit === "value" && s.encoder === "effectful"),
      "wakeAt is in the past and a Tick changes nothing (the driver would spin)"
    ],
    [
      "the recording bounded by the lease only",
      leaseBoundOnly,
      some((s) => s.deadline && s.heartbeat && s.downstream._tag === "Ends" && s.downstream.after >= 80),
      "the attempt answered past its bound"
    ],
    [
      "maxHold read late",
      lateHold,
      some((s) => s.maxHold !== undefined && s.downstream._tag === "Never" && !s.heartbeat),
      "the attempt kept executing past maxHold"
    ],
    [
      "maxHold read late",
      lateHold,
      some((s) => s.maxHold !== undefined && s.downstream._tag === "Never" && !s.heartbeat),
      "an extension was sent at or past maxHold"
    ],
    [
      "no policy at maxHold",
      noPolicyAtHold,
      some((s) => s.maxHold !== undefined && s.downstream._tag === "Never" && s.onTimeout === "markUnknown"),
      "the timeout policy was not applied to a downstream let go at maxHold"
    ],
    [
      "a refused write counted as written",
      ignoreFencing,
      some((s) => s.downstream._tag === "Stubborn" && !s.heartbeat),
      "the answer (or the write) is not one the exit table allows"
    ]
  ]
  for (const [name, step, subset, rule] of mutations) {
    it(`${name}: "${rule}"`, async () => {
      const report = await explore(subset, { step, maxFaults: 2 })
      console.log(
        `mutation "${name}" on ${subset.length} scenarios: ${JSON.stringify(Object.fromEntries(report.rules))}`
      )
      assert.isAbove(report.rules.get(rule) ?? 0, 0, `${name} was not caught (${describeScenario(subset[0]!)}, ...)`)
    }, 300_000)
  }
})
