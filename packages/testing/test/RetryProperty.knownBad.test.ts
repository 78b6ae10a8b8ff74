/**
 * Known-bad configurations: the property must fail on each, with a shrunk counterexample that
 * names what went wrong. Each runs fast-check through `RetryProperty.run` and inspects the report
 * (a failing property is the expected outcome here, not a failing test).
 */
import { IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import type { FaultyStore, SimulatedDownstream } from "@effect-idempotency/testing"
import { PlatformModel, RetryProperty } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { Config } from "./utils/orders.js"
import { createOrder, order, OrdersApiSimulated } from "./utils/orders.js"

const TIMEOUT = { timeout: 600_000 }

/** Runs a property that must fail, and returns its counterexample. */
const counterexample = <R>(property: RetryProperty.Property<R>, numRuns = 300) =>
  Effect.gen(function*() {
    const report = yield* RetryProperty.run(property, { numRuns })
    assert.isFalse(report.passed, `expected a counterexample:\n${report.text}`)
    const found = report.counterexample
    if (found === undefined) return assert.fail(`no counterexample:\n${report.text}`)
    assert.include(report.text, "Timeline:")
    assert.include(report.text, "Scenario:")
    return { report, found, tags: found.report.violations.map((violation) => violation._tag) }
  })

/** What a test changes in the property. */
interface Overrides {
  readonly deduplicate?: boolean
  readonly downstream?: { readonly kinds: ReadonlyArray<SimulatedDownstream.Behaviour["_tag"]> }
  readonly faults?: boolean | Partial<FaultyStore.ArbitraryOptions>
  readonly store?: Effect.Effect<IdempotencyStore.IdempotencyStore["Type"]>
  readonly require?: RetryProperty.Requirement
}

const property = (config: Config, overrides?: Overrides) =>
  RetryProperty.make({
    operation: createOrder(config),
    payload: order,
    platform: PlatformModel.awsLambdaAsync,
    deduplicate: false,
    services: OrdersApiSimulated,
    ...overrides
  })

/** A memory store with a defect, for the checks that guard against broken stores. */
const brokenStore = (
  defect: (store: IdempotencyStore.IdempotencyStore["Type"]) => IdempotencyStore.IdempotencyStore["Type"]
) => Effect.map(IdempotencyStore.makeMemory({ warn: false }), defect)

describe("RetryProperty catches known-bad configurations", () => {
  it.effect(
    "defect policy `release` with a downstream that does not deduplicate: a write before the defect is repeated",
    () =>
      Effect.gen(function*() {
        const { found, tags } = yield* counterexample(
          property({ timeout: "2 seconds", onTimeout: "markUnknown", onDefect: "release" }, {
            downstream: { kinds: ["Succeed", "ApplyThenDie"] },
            faults: false
          })
        )
        assert.include(tags, "DuplicateWrite")
        assert.include(found.report.timeline, "then dies")
      }),
    TIMEOUT
  )

  it.effect(
    "timeout policy `release` with a downstream that does not deduplicate: the late answer's write is repeated",
    () =>
      Effect.gen(function*() {
        const { found, report, tags } = yield* counterexample(
          property({ timeout: "2 seconds", onTimeout: "release" }, {
            downstream: { kinds: ["Succeed", "AnswerLate"] },
            faults: false
          })
        )
        assert.include(tags, "DuplicateWrite")
        assert.strictEqual(report.guarantee, "atLeastOnce")
        const duplicate = found.report.violations.find((violation) => violation._tag === "DuplicateWrite")
        assert.isTrue(duplicate?._tag === "DuplicateWrite" && duplicate.writes.length === 2)
        assert.include(found.report.text, "duplicate write: the downstream applied POST /orders")
        assert.include(found.report.timeline, "DownstreamTimeout (policy release)")
        assert.include(found.report.timeline, "write #2 applied")
        // shrunk to one delivery, whose first attempt's write outlives the timeout
        assert.strictEqual(found.scenario.deliveries.length, 1)
        const first = found.scenario.deliveries[0]!.attempts[0]!.value.downstream[0]!
        assert.isTrue(
          first._tag === "AnswerLate"
            ? first.answerAfterMs >= 2_000
            : first._tag === "Succeed" && first.latencyMs >= 2_000,
          `the first call answers after the timeout: ${found.report.text}`
        )
      }),
    TIMEOUT
  )

  it.effect(
    "timeout policy `keepLease` with a downstream that does not deduplicate: the takeover writes again",
    () =>
      Effect.gen(function*() {
        const { found, tags } = yield* counterexample(
          property({ timeout: "2 seconds", onTimeout: "keepLease" }, {
            downstream: { kinds: ["Succeed", "AnswerLate"] },
            faults: false
          })
        )
        assert.deepStrictEqual(tags, ["DuplicateWrite"])
        assert.include(found.report.timeline, "DownstreamTimeout (policy keepLease)")
        assert.include(found.report.timeline, "reserve: reserved (execution 2")
      }),
    TIMEOUT
  )

  it.effect(
    "a crash after the downstream call, without deduplication: the lost completion leads to a second write",
    () =>
      Effect.gen(function*() {
        const { found, tags } = yield* counterexample(
          property({ timeout: "2 seconds", onTimeout: "keepLease" }, {
            downstream: { kinds: ["Succeed"] },
            faults: { crashPoints: ["afterDownstream", "beforeComplete"], methods: [] }
          })
        )
        assert.deepStrictEqual(tags, ["DuplicateWrite"])
        assert.match(found.report.timeline, /FAULT crash (after the downstream call|before complete)/)
      }),
    TIMEOUT
  )

  it.effect(
    "failure policy `release` for an error raised after the write was applied: the retry writes again",
    () =>
      Effect.gen(function*() {
        const { found, tags } = yield* counterexample(
          property({ timeout: "2 seconds", onTimeout: "markUnknown", onTransient: "release" }, {
            downstream: { kinds: ["Succeed", "ApplyThenFail"] },
            faults: false
          })
        )
        assert.deepStrictEqual(tags, ["DuplicateWrite"])
        assert.include(found.report.timeline, "then fails with Unavailable")
        assert.include(found.report.timeline, "release: record deleted")
      }),
    TIMEOUT
  )

  it.effect(
    "a TTL shorter than the platform's maximum event age: a late duplicate delivery writes again",
    () =>
      Effect.gen(function*() {
        const { found, tags } = yield* counterexample(
          property({ timeout: "2 seconds", onTimeout: "markUnknown", onTransient: "store", ttl: "1 hour" }, {
            downstream: { kinds: ["Succeed"] },
            faults: false
          }),
          500
        )
        assert.deepStrictEqual(tags, ["DuplicateWrite"])
        const late = found.scenario.deliveries.find((delivery) => delivery.source === "duplicate")
        assert.isTrue(late !== undefined && late.atMs >= 3_600_000, found.report.text)
      }),
    TIMEOUT
  )

  it.effect(
    "a deduplicating downstream that is not sent the key: the retry writes again",
    () =>
      Effect.gen(function*() {
        const { tags } = yield* counterexample(
          property({ timeout: "2 seconds", onTimeout: "keepLease", forwardKey: false }, {
            deduplicate: true,
            downstream: { kinds: ["Succeed", "AnswerLate"] },
            faults: false
          })
        )
        assert.deepStrictEqual(tags, ["DuplicateWrite"])
      }),
    TIMEOUT
  )

  it.effect(
    "a store that never lets an expired lease be taken over: the key stays blocked past its lease",
    () =>
      Effect.gen(function*() {
        const { found, tags } = yield* counterexample(
          property({ timeout: "2 seconds", onTimeout: "keepLease" }, {
            deduplicate: true,
            faults: { crashPoints: ["afterReserve"], methods: [] },
            store: brokenStore((store) => ({
              ...store,
              reserve: (request) => store.reserve({ ...request, takeover: false })
            }))
          })
        )
        assert.include(tags, "BlockedPastLease")
        assert.include(found.report.text, "the store did not let the attempt take the key over")
      }),
    TIMEOUT
  )

  it.effect(
    "a store that holds leases far longer than asked: the key stays blocked past its lease",
    () =>
      Effect.gen(function*() {
        const { found, tags } = yield* counterexample(
          property({ timeout: "2 seconds", onTimeout: "keepLease" }, {
            deduplicate: true,
            faults: { crashPoints: ["afterReserve"], methods: [] },
            store: brokenStore((store) => ({
              ...store,
              reserve: (request) => store.reserve({ ...request, lease: Duration.times(request.lease, 1_000) })
            }))
          })
        )
        assert.include(tags, "BlockedPastLease")
        assert.include(found.report.text, "IdempotencyConflict")
      }),
    TIMEOUT
  )

  it.effect(
    "a store that forgets recorded outcomes: the execution after the recorded outcome is flagged",
    () =>
      Effect.gen(function*() {
        const { found, tags } = yield* counterexample(
          property({ timeout: "2 seconds", onTimeout: "keepLease" }, {
            deduplicate: true,
            faults: false,
            store: brokenStore((store) => ({
              ...store,
              complete: (request) => store.complete({ ...request, ttl: Duration.millis(1) })
            }))
          })
        )
        assert.deepStrictEqual(tags, ["OutcomeMismatch"], found.report.text)
        assert.include(found.report.text, "executed again")
      }),
    TIMEOUT
  )

  it.effect(
    "a store that replays an outcome other than the recorded one: the replay is flagged",
    () =>
      Effect.gen(function*() {
        const tamper = (result: IdempotencyRecord.ReserveResult): IdempotencyRecord.ReserveResult =>
          result._tag === "Existing" && result.record.outcome?._tag === "Success"
            ? IdempotencyRecord.ReserveResult.Existing({
              now: result.now,
              record: {
                ...result.record,
                outcome: IdempotencyRecord.StoredOutcome.Success({ value: JSON.stringify({ orderId: 999 }) })
              }
            })
            : result
        const { found, tags } = yield* counterexample(
          property({ timeout: "2 seconds", onTimeout: "keepLease" }, {
            deduplicate: true,
            store: brokenStore((store) => ({
              ...store,
              reserve: (request) => Effect.map(store.reserve(request), tamper)
            }))
          })
        )
        assert.deepStrictEqual(tags, ["OutcomeMismatch"])
        assert.include(found.report.text, "{\"orderId\":999}")
      }),
    TIMEOUT
  )

  it.effect(
    "`markUnknown` is at most once: a property that requires exactly once fails with the lost outcome",
    () =>
      Effect.gen(function*() {
        const { found, report, tags } = yield* counterexample(
          property({ timeout: "2 seconds", onTimeout: "markUnknown", onTransient: "store" }, {
            require: "exactlyOnce",
            deduplicate: true
          })
        )
        assert.deepStrictEqual(tags, ["OutcomeLost"])
        assert.strictEqual(report.guarantee, "atMostOnce")
        assert.include(found.report.timeline, "DownstreamTimeout (policy markUnknown, replayed)")
      }),
    TIMEOUT
  )

  it.effect(
    "`check` fails with the counterexample's timeline as its message, for `it.effect.prop`",
    () =>
      Effect.gen(function*() {
        const bad = property({ timeout: "2 seconds", onTimeout: "release" }, { faults: false })
        const { found } = yield* counterexample(bad)
        const error = yield* Effect.flip(bad.check(found.scenario))
        assert.strictEqual(error._tag, "RetryPropertyFailure")
        assert.include(error.message, "duplicate write")
        assert.include(error.message, "Timeline:")
        assert.strictEqual(error.guarantee, "atLeastOnce")
      }),
    TIMEOUT
  )
})
