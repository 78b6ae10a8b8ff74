/**
 * Known-bad configurations: the property must fail on each, with a shrunk counterexample that
 * names what went wrong. Every run has a fixed seed, so each must-fail holds on every run, not with
 * high probability. A failing property is the expected outcome here, not a failing test.
 */
import type { Idempotency } from "@effect-idempotency/core"
import { IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import type { FaultyStore } from "@effect-idempotency/testing"
import { PlatformModel, RetryProperty, SimulatedDownstream } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type { Config, Order, OrderRejected, OrdersApi, OrdersUnavailable } from "./utils/orders.js"
import { createOrder, order, ordersApi, OrdersApiSimulated } from "./utils/orders.js"

const TIMEOUT = { timeout: 600_000 }

type Created = { readonly orderId: number }
type OrderOptions = RetryProperty.Options<Order, Created, OrderRejected | OrdersUnavailable, OrdersApi, OrdersApi>

/** Runs a property that must fail with `seed`, and returns its counterexample. */
const counterexample = (options: OrderOptions, seed: number, numRuns = 300) =>
  Effect.gen(function*() {
    const report = yield* RetryProperty.run(options, { numRuns, seed })
    assert.isFalse(report.passed, `expected a counterexample:\n${report.text}`)
    const found = report.counterexample
    if (found === undefined) return assert.fail(`no counterexample:\n${report.text}`)
    assert.include(report.text, `replay with seed ${seed}`)
    assert.include(report.text, "Timeline:")
    assert.include(report.text, "Scenario:")
    return { report, found, tags: found.violations.map((violation) => violation._tag) }
  })

/** What a test changes in the property. */
interface Overrides {
  readonly deduplicate?: boolean
  readonly downstream?: { readonly kinds: ReadonlyArray<SimulatedDownstream.Behaviour["_tag"]> }
  readonly faults?: boolean | Partial<FaultyStore.ArbitraryOptions>
  readonly store?: Effect.Effect<IdempotencyStore.IdempotencyStore["Type"]>
  readonly require?: RetryProperty.Requirement
  readonly services?: Layer.Layer<OrdersApi, never, SimulatedDownstream.SimulatedDownstream>
  readonly operation?: OrderOptions["operation"]
}

const property = (config: Config, overrides?: Overrides): OrderOptions => ({
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

/** One event on AWS Lambda: the first attempt meets `first`, the platform's retry a minute later succeeds. */
const retriedOnce = (first: SimulatedDownstream.Behaviour): RetryProperty.Scenario => ({
  platform: PlatformModel.awsLambdaAsync.name,
  timeLimitMs: 3_000,
  maxEventAgeMs: undefined,
  deliveries: [{
    source: "event",
    atMs: 0,
    attempts: [
      { waitMs: 0, value: { downstream: [first], faults: [] } },
      { waitMs: 60_000, value: { downstream: [SimulatedDownstream.succeed()], faults: [] } }
    ]
  }]
})

describe("RetryProperty catches known-bad configurations", () => {
  it.effect(
    "defect policy `release` with a downstream that does not deduplicate: a write before the defect is repeated",
    () =>
      Effect.gen(function*() {
        const { found, tags } = yield* counterexample(
          property({ timeout: "2 seconds", onTimeout: "markUnknown", onDefect: "release" }, {
            downstream: { kinds: ["Succeed", "ApplyThenDie"] },
            faults: false
          }),
          1
        )
        assert.include(tags, "DuplicateWrite")
        assert.include(found.timeline, "then dies")
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
          }),
          1
        )
        assert.include(tags, "DuplicateWrite")
        assert.strictEqual(report.guarantee, "atLeastOnce")
        const duplicate = found.violations.find((violation) => violation._tag === "DuplicateWrite")
        assert.isTrue(duplicate?._tag === "DuplicateWrite" && duplicate.writes.length === 2)
        assert.include(found.text, "duplicate write: the downstream applied POST /orders")
        assert.include(found.timeline, "DownstreamTimeout (policy release)")
        assert.include(found.timeline, "write #2 applied")
        // shrunk to one delivery, whose first attempt's write outlives the timeout
        assert.strictEqual(found.scenario.deliveries.length, 1)
        const first = found.scenario.deliveries[0]!.attempts[0]!.value.downstream[0]!
        assert.isTrue(
          first._tag === "AnswerLate" && first.answerAfterMs >= 2_000,
          `the first call answers after the timeout: ${found.text}`
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
          }),
          1
        )
        assert.deepStrictEqual(tags, ["DuplicateWrite"])
        assert.include(found.timeline, "DownstreamTimeout (policy keepLease)")
        assert.include(found.timeline, "reserve: reserved (execution 2")
      }),
    TIMEOUT
  )

  describe("a write that lands after its caller gave up", () => {
    // the first call's write reaches the orders API after the 2 s timeout, when the attempt has
    // already applied its timeout policy; the platform's retry a minute later writes again
    const late = SimulatedDownstream.writeLandsLate({ applyAfter: "2500 millis", answerAfter: "2800 millis" })
    // the same timing, but the write is cancelled with its caller: nothing is written twice
    const cancelled = SimulatedDownstream.answerLate({ applyAfter: "2500 millis", answerAfter: "2800 millis" })

    for (const onTimeout of ["release", "keepLease"] as const) {
      it.effect(
        `is written again under timeout policy \`${onTimeout}\` without deduplication`,
        () =>
          Effect.gen(function*() {
            const options = property({ timeout: "2 seconds", onTimeout }, { faults: false })
            const error = yield* Effect.flip(RetryProperty.check(options)(retriedOnce(late)))
            assert.include(error.message, "duplicate write")
            assert.include(error.message, "write #1 applied, after its caller gave up")
            assert.include(error.message, `DownstreamTimeout (policy ${onTimeout})`)
            const withoutLateWrite = yield* RetryProperty.play(options)(retriedOnce(cancelled))
            assert.deepStrictEqual(withoutLateWrite.violations, [], "a cancelled write hides the duplicate")
            assert.strictEqual(withoutLateWrite.writes, 1)

            // and the property finds it from the scenarios it draws
            const { tags } = yield* counterexample(
              property({ timeout: "2 seconds", onTimeout }, { downstream: { kinds: ["Succeed", "WriteLandsLate"] } }),
              1
            )
            assert.include(tags, "DuplicateWrite")
          }),
        TIMEOUT
      )
    }
  })

  it.effect(
    "a write that lands after its caller gave up is written once under timeout policy `markUnknown`",
    () =>
      Effect.gen(function*() {
        const late = SimulatedDownstream.writeLandsLate({ applyAfter: "2500 millis", answerAfter: "2800 millis" })
        const options = property({ timeout: "2 seconds", onTimeout: "markUnknown" }, { faults: false })
        const report = yield* RetryProperty.play(options)(retriedOnce(late))
        assert.deepStrictEqual(report.violations, [], report.text)
        assert.strictEqual(report.writes, 1)
        assert.include(report.timeline, "write #1 applied, after its caller gave up")
        assert.strictEqual(report.guarantee, "atMostOnce")
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
          }),
          1
        )
        assert.deepStrictEqual(tags, ["DuplicateWrite"])
        assert.match(found.timeline, /FAULT crash (after the downstream call|before complete)/)
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
          }),
          1
        )
        assert.deepStrictEqual(tags, ["DuplicateWrite"])
        assert.include(found.timeline, "then fails with Unavailable")
        assert.include(found.timeline, "release: record deleted")
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
          1,
          500
        )
        assert.deepStrictEqual(tags, ["DuplicateWrite"])
        const duplicate = found.scenario.deliveries.find((delivery) => delivery.source === "duplicate")
        assert.isTrue(duplicate !== undefined && duplicate.atMs >= 3_600_000, found.text)
      }),
    TIMEOUT
  )

  it.effect(
    "a deduplicating downstream that is not sent the key: the retry writes again",
    () =>
      Effect.gen(function*() {
        const { tags } = yield* counterexample(
          property({ timeout: "2 seconds", onTimeout: "keepLease" }, {
            deduplicate: true,
            services: ordersApi({ forwardKey: false }),
            downstream: { kinds: ["Succeed", "AnswerLate"] },
            faults: false
          }),
          1
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
          }),
          1
        )
        assert.include(tags, "BlockedPastLease")
        assert.include(found.text, "the store did not let the attempt take the key over")
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
          }),
          1
        )
        assert.include(tags, "BlockedPastLease")
        assert.include(found.text, "IdempotencyConflict")
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
          }),
          1
        )
        assert.deepStrictEqual(tags, ["OutcomeMismatch"], found.text)
        assert.include(found.text, "executed again")
      }),
    TIMEOUT
  )

  /** A store whose replays carry another outcome than the one recorded. */
  const tampering = (outcome: (recorded: IdempotencyRecord.StoredOutcome) => IdempotencyRecord.StoredOutcome) =>
    brokenStore((store) => ({
      ...store,
      reserve: (request) =>
        Effect.map(store.reserve(request), (result) =>
          result._tag === "Existing" && result.record.outcome !== undefined
            ? IdempotencyRecord.ReserveResult.Existing({
              now: result.now,
              record: { ...result.record, outcome: outcome(result.record.outcome) }
            })
            : result)
    }))

  it.effect(
    "a store that replays a success other than the recorded one: the replay is flagged",
    () =>
      Effect.gen(function*() {
        const { found, tags } = yield* counterexample(
          property({ timeout: "2 seconds", onTimeout: "keepLease" }, {
            deduplicate: true,
            store: tampering((outcome) =>
              outcome._tag === "Success"
                ? IdempotencyRecord.StoredOutcome.Success({ value: JSON.stringify({ orderId: 999 }) })
                : outcome
            )
          }),
          1
        )
        assert.deepStrictEqual(tags, ["OutcomeMismatch"])
        assert.include(found.text, "{\"orderId\":999}")
      }),
    TIMEOUT
  )

  it.effect(
    "a store that replays a failure other than the recorded one: the replayed failure is flagged",
    () =>
      Effect.gen(function*() {
        const { found, tags } = yield* counterexample(
          property({ timeout: "2 seconds", onTimeout: "markUnknown", onTransient: "store" }, {
            downstream: { kinds: ["Succeed", "Fail"] },
            faults: false,
            store: tampering((outcome) =>
              outcome._tag === "Failure"
                ? IdempotencyRecord.StoredOutcome.Failure({
                  error: JSON.stringify({ _tag: "OrderRejected", call: 999 })
                })
                : outcome
            )
          }),
          1
        )
        assert.deepStrictEqual(new Set(tags), new Set(["OutcomeMismatch"]))
        assert.include(found.text, "ended with {\"_tag\":\"OrderRejected\",\"call\":999}, but attempt 1 ended with")
      }),
    TIMEOUT
  )

  describe("an outcome mismatch says what differs when both values print the same", () => {
    class Receipt {
      constructor(readonly orderId: number) {}
    }
    const cases: ReadonlyArray<
      readonly [string, (value: Created, replayed: boolean) => unknown, string]
    > = [
      [
        "a class instance and a plain object",
        (value, replayed) => replayed ? new Receipt(value.orderId) : value,
        "at the top: a plain object vs an instance of Receipt"
      ],
      [
        "a Date and a string",
        (_, replayed) => replayed ? { at: new Date(0).toISOString() } : { at: new Date(0) },
        "at .at: a Date vs a string"
      ],
      ["-0 and 0", (_, replayed) => ({ orderId: replayed ? -0 : 0 }), "at .orderId: 0 vs -0"],
      [
        "an undefined member and an absent one",
        (value, replayed) => replayed ? value : { ...value, note: undefined },
        "at .note: undefined vs absent"
      ]
    ]
    for (const [name, reshape, difference] of cases) {
      it.effect(name, () =>
        Effect.gen(function*() {
          const base = createOrder({ timeout: "2 seconds", onTimeout: "keepLease" })
          // an operation whose replays decode to another shape than its fresh values
          const operation: OrderOptions["operation"] = {
            name: base.name,
            runDetailed: (request) =>
              Effect.map(base.runDetailed(request), (result): Idempotency.Result<Created> => ({
                ...result,
                value: reshape(result.value, result.replayed) as Created
              }))
          }
          const { found, tags } = yield* counterexample(
            property({ timeout: "2 seconds", onTimeout: "keepLease" }, { operation, deduplicate: true, faults: false }),
            1
          )
          assert.deepStrictEqual(tags, ["OutcomeMismatch"])
          assert.include(found.text, `for the same recorded outcome; they differ ${difference}`)
        }), TIMEOUT)
    }
  })

  it.effect(
    "`markUnknown` is at most once: a property that requires exactly once fails with the lost outcome",
    () =>
      Effect.gen(function*() {
        const { found, report, tags } = yield* counterexample(
          property({ timeout: "2 seconds", onTimeout: "markUnknown", onTransient: "store" }, {
            require: "exactlyOnce",
            deduplicate: true
          }),
          1
        )
        assert.deepStrictEqual(tags, ["OutcomeLost"])
        assert.strictEqual(report.guarantee, "atMostOnce")
        assert.include(found.timeline, "DownstreamTimeout (policy markUnknown, replayed)")
      }),
    TIMEOUT
  )

  it.effect(
    "`check` fails with the counterexample's timeline as its message, for `it.effect.prop`",
    () =>
      Effect.gen(function*() {
        const bad = property({ timeout: "2 seconds", onTimeout: "release" }, { faults: false })
        const { found } = yield* counterexample(bad, 1)
        const error = yield* Effect.flip(RetryProperty.check(bad)(found.scenario))
        assert.strictEqual(error._tag, "RetryPropertyFailure")
        assert.include(error.message, "duplicate write")
        assert.include(error.message, "Timeline:")
        assert.strictEqual(error.guarantee, "atLeastOnce")
      }),
    TIMEOUT
  )

  it.effect(
    "`assert` fails with the counterexample; `run` with the same seed and path replays it",
    () =>
      Effect.gen(function*() {
        const bad = property({ timeout: "2 seconds", onTimeout: "release" }, { faults: false })
        const error = yield* Effect.flip(RetryProperty.assert(bad, { numRuns: 300, seed: 7 }))
        assert.include(error.message, "Counterexample after")
        const first = yield* RetryProperty.run(bad, { numRuns: 300, seed: 7 })
        assert.isDefined(first.path)
        const replay = yield* RetryProperty.run(bad, { seed: first.seed, path: first.path! })
        assert.isFalse(replay.passed)
        assert.deepStrictEqual(replay.counterexample?.scenario, first.counterexample?.scenario)
      }),
    TIMEOUT
  )
})
