/**
 * The scenario as a test, called once per store: the counts of the verification, and the shape of
 * every attempt.
 */
import { assert, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Platform from "../src/Platform.js"
import * as Scenario from "../src/Scenario.js"
import * as Stores from "../src/Stores.js"

/**
 * Short enough for CI. The margin (750 ms) is what a loaded machine has for the first attempt's
 * store round trips; the other steps hold by construction: the downstream answers after the limit,
 * and the third attempt of the forwarded run comes after the lease (1.75 s: the downstream timeout
 * plus the core's 1 s lease margin) because it waits for the downstream timeout, a retry delay and
 * a whole-second `Retry-After`.
 */
export const settings: Scenario.Settings = {
  timeLimit: "1500 millis",
  margin: "750 millis",
  retryDelays: ["100 millis", "200 millis"],
  lateBy: "150 millis"
}

class ScenarioStore extends Context.Tag("examples/test/ScenarioStore")<ScenarioStore, Stores.Store>() {}

const statuses = (attempts: ReadonlyArray<Platform.Attempt>) =>
  attempts.map((attempt) =>
    Option.match(attempt.response, {
      onNone: () => "cut off",
      onSome: (response) => `${response.status}${response.replayed ? " replayed" : ""}`
    })
  )

const runNamed = (report: Scenario.Report, name: Scenario.RunName) => {
  const run = report.runs.find((run) => run.name === name)
  assert.isDefined(run)
  return run!
}

/**
 * The scenario's tests on one store, started once for them (with the live clock), through the
 * Netlify function or the HTTP server's middleware.
 */
export const scenarioSuite = (name: string, choice: Stores.Choice, via: Scenario.Via = "function") =>
  layer(Layer.scoped(ScenarioStore, Stores.make(choice)), { excludeTestServices: true, timeout: "60 seconds" })(
    name,
    (it) => {
      it.effect("the three runs end with the counts of the verification", () =>
        Effect.gen(function*() {
          const report = yield* Scenario.run(yield* ScenarioStore, settings, Scenario.specs, via)
          assert.deepStrictEqual(Scenario.failures(report), [])

          const without = runNamed(report, "withoutIdempotency")
          assert.deepStrictEqual(statuses(without.attempts), ["cut off", "201"])
          assert.strictEqual(without.orders.length, 2)
          assert.strictEqual(without.records.length, 0)
          assert.isFalse(without.replayed)

          const protectedRun = runNamed(report, "withIdempotency")
          assert.deepStrictEqual(statuses(protectedRun.attempts), ["504", "504 replayed", "504 replayed"])
          // the first attempt answered (504) before the platform's cut-off, which would have shown as "cut off":
          // its timeout was the limit less the margin
          assert.strictEqual(protectedRun.orders.length, 1)
          assert.strictEqual(protectedRun.downstreamRequests.length, 1)
          assert.strictEqual(protectedRun.records.length, 1)
          assert.strictEqual(protectedRun.records[0].status, "COMPLETED")
          assert.include(protectedRun.records[0].outcome, "Timeout")
          assert.isTrue(protectedRun.replayed)
          assert.strictEqual(protectedRun.replayedBy, "idempotency store")
          assert.isTrue(
            protectedRun.timeline.some((entry) =>
              entry.source === "function" && entry.text.startsWith("replayed the stored outcome")
            )
          )

          const forwarded = runNamed(report, "withForwardedKey")
          assert.deepStrictEqual(statuses(forwarded.attempts), ["504", "409", "201"])
          assert.strictEqual(forwarded.orders.length, 1)
          assert.strictEqual(forwarded.records.length, 1)
          assert.strictEqual(forwarded.records[0].status, "COMPLETED")
          assert.strictEqual(forwarded.records[0].outcome, "Success")
          assert.strictEqual(forwarded.records[0].attempt, 2)
          // the takeover sent the same derived key, not the client's, and the downstream deduplicated
          const keys = forwarded.downstreamRequests.map((request) => request.idempotencyKey)
          assert.strictEqual(keys.length, 2)
          assert.isString(keys[0])
          assert.strictEqual(keys[0], keys[1])
          assert.notStrictEqual(keys[0], forwarded.key)
          const final = forwarded.attempts[2].response
          assert.isTrue(Option.isSome(final))
          const body = JSON.parse(Option.getOrThrow(final).body) as { orderId: string; downstreamReplayed: boolean }
          assert.strictEqual(body.orderId, forwarded.orders[0].orderId)
          assert.isTrue(body.downstreamReplayed)
          assert.include(forwarded.records[0].value ?? "", forwarded.orders[0].orderId)
          assert.strictEqual(forwarded.replayedBy, "downstream (forwarded key)")
        }), { timeout: 30_000 })

      it.effect(
        "the verification fails when the timeout policy lets a retry write again",
        () =>
          Effect.gen(function*() {
            const atLeastOnce: Scenario.RunSpec = {
              name: "withIdempotency",
              title: "with idempotency (timeout policy release)",
              explanation: "",
              onTimeout: "release",
              dedupByKey: false
            }
            const report = yield* Scenario.run(yield* ScenarioStore, settings, [atLeastOnce], via)
            const run = runNamed(report, "withIdempotency")
            // release deletes the record at the timeout: the retry executes, and the downstream writes twice
            assert.deepStrictEqual(statuses(run.attempts), ["504", "201"])
            assert.strictEqual(run.orders.length, 2)
            assert.includeMembers([...Scenario.failures(report)], [
              "withIdempotency: 2 downstream records, expected 1",
              "withIdempotency: no retry got the stored result"
            ])
          }),
        { timeout: 30_000 }
      )
    }
  )
