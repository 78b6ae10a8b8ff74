/**
 * The exhaustive checker of the execution's state machine (`src/internal/execution.ts`).
 *
 * A model (`utils/ExecutionModel.ts`) of what surrounds the machine (the downstream, the store, the
 * worker's recording, the caller, the clock) runs the machine's commands as the driver in
 * `attempt.ts` does, and explores every ordering of the events below up to the stated bounds, on
 * every scenario:
 *
 * - the downstream ends by itself (before, at and after its deadline, after its lease), hangs, or
 *   runs in an uninterruptible region that ends after its deadline, after its lease, after two;
 * - each extension of the lease is applied at once, slowly, after the bound of the call (a timeout),
 *   fails, hangs, or finds the record taken over (a second attempt, fenced by its token);
 * - the recording answers at once, slowly, or hangs;
 * - the caller is interrupted at any point, once;
 * - the clock jumps past the lease (a frozen process) at any point, once;
 * - with and without a heartbeat, an attempt's deadline, and the live clock's first timer.
 *
 * The bounds: up to two faulty store answers (slow, lost, failed, hanging) per run, one caller
 * interruption, one clock jump. Events due at the same instant are taken in every order; a store
 * call or an inspection of the worker answers in a step of its own, so anything due at that instant
 * may come first. A state met again by another ordering is not explored twice; the counts of states
 * and orderings are printed.
 *
 * At every step it checks the rules the README's exit table states for an execution:
 *
 * - an interruptible downstream never runs past its deadline, its lease, a lost lease or its
 *   interrupted caller;
 * - the lease of a downstream that cannot be stopped is kept while it winds down, on a healthy store;
 * - no interruption throws away the value of a downstream inside an uninterruptible region (only a
 *   lost lease does: another attempt owns the record);
 * - an outcome that is known gets time to be recorded (half the margin at least) on a healthy store,
 *   and its recording is cut off only past the lease or the attempt's deadline;
 * - the attempt answers by its deadline, or a margin after the end of a downstream that could not be
 *   stopped; it always answers; and the watchdog never spins without the clock moving.
 *
 * The schemas, policies and store writes applied after the machine's answer are checked on the real
 * engine by `ExitSpace.test.ts`, over every combination of the same events.
 */
import { assert, describe, it } from "@effect/vitest"
import { check, emptyReport, scenarios } from "./utils/ExecutionModel.js"

describe("the execution's state machine", () => {
  it("keeps every rule of the exit table over every ordering of its events up to the bounds", async () => {
    const report = emptyReport()
    const all = scenarios()
    for (const scenario of all) {
      check(scenario, report)
      // lets the test runner's messages through between scenarios
      await new Promise((resolve) => setImmediate(resolve))
    }
    console.log(
      `execution machine: ${all.length} scenarios, ${report.states} states, ${report.orderings} orderings, ` +
        `${report.coverage.size} (state, event) pairs, answers ${JSON.stringify(Object.fromEntries(report.answers))}`
    )
    // every event met each phase (the end of the downstream, only while it runs)
    const events = [
      "CallerInterrupted",
      "DownstreamEnded",
      "Extended",
      "ExtensionFailed",
      "Inspected",
      "LeaseLost",
      "Look"
    ]
    for (const phase of ["downstream", "record"]) {
      const met = new Set(
        [...report.coverage].filter((pair) => pair.startsWith(`${phase}/`)).map((pair) => pair.split(": ")[1])
      )
      assert.deepStrictEqual([...met].sort(), events.filter((e) => phase === "downstream" || e !== "DownstreamEnded"))
    }
    if (report.violated > 0) {
      console.log(report.violated, Object.fromEntries(report.rules), report.violations.join("\n\n"))
    }
    assert.deepStrictEqual(report.violations, [])
    // every kind of end was reached
    for (
      const how of [
        "recorded",
        "cut",
        "unknown:timeout",
        "unknown:leaseLost",
        "unknown:leaseExpiring",
        "unknown:callerInterrupted"
      ]
    ) {
      assert.isAbove(report.answers.get(how) ?? 0, 0, how)
    }
  }, 600_000)
})
