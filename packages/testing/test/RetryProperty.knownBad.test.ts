/**
 * Known-bad configurations: the property must fail on each, with a shrunk counterexample that
 * names what went wrong. Every run has a fixed seed, so each must-fail holds on every run, not with
 * high probability. A failing property is the expected outcome here, not a failing test.
 */
import type { Idempotency } from "@effect-idempotency/core"
import { IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { PlatformModel, RetryProperty, SimulatedDownstream } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { Config, OrderOptions } from "./utils/orders.js"
import { createOrder, ordersApi, property } from "./utils/orders.js"

const TIMEOUT = { timeout: 600_000 }

type Created = { readonly orderId: number }

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

/** A memory store with a defect, for the checks that guard against broken stores. */
const brokenStore = (
  defect: (store: IdempotencyStore.IdempotencyStore["Type"]) => IdempotencyStore.IdempotencyStore["Type"]
) => Effect.map(IdempotencyStore.makeMemory({ warn: false }), defect)

/** The memory store, reserving every request as `change` makes it. */
const reservingAs = (change: (request: IdempotencyStore.ReserveRequest) => IdempotencyStore.ReserveRequest) =>
  brokenStore((store) => ({ ...store, reserve: (request) => store.reserve(change(request)) }))

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

type Tag = RetryProperty.Violation["_tag"]

/**
 * A configuration the property must fail on with seed 1, and what its counterexample must say: its
 * violations (exactly these, in order; these, in any number; or at least this one), the guarantee
 * reported, lines of its timeline and of its text, and any further `check`.
 */
interface KnownBad {
  readonly name: string
  readonly config: Config
  readonly overrides: Partial<OrderOptions>
  readonly numRuns?: number
  readonly violations: { readonly exactly: ReadonlyArray<Tag> } | { readonly only: ReadonlyArray<Tag> } | {
    readonly includes: Tag
  }
  readonly guarantee?: RetryProperty.Guarantee
  readonly timeline?: ReadonlyArray<string | RegExp>
  readonly text?: ReadonlyArray<string>
  readonly check?: (found: RetryProperty.CaseReport) => void
}

const knownBad: ReadonlyArray<KnownBad> = [
  {
    name: "defect policy `release` with a downstream that does not deduplicate: a write before the defect is repeated",
    config: { timeout: "2 seconds", onTimeout: "markUnknown", onDefect: "release" },
    overrides: { downstream: { kinds: ["Succeed", "ApplyThenDie"] }, faults: false },
    violations: { includes: "DuplicateWrite" },
    timeline: ["then dies"]
  },
  {
    name: "timeout policy `release` with a downstream that does not deduplicate: the late answer's write is repeated",
    config: { timeout: "2 seconds", onTimeout: "release" },
    overrides: { downstream: { kinds: ["Succeed", "AnswerLate"] }, faults: false },
    violations: { includes: "DuplicateWrite" },
    guarantee: "atLeastOnce",
    text: ["duplicate write: the downstream applied POST /orders"],
    timeline: ["DownstreamTimeout (policy release)", "write #2 applied"],
    check: (found) => {
      const duplicate = found.violations.find((violation) => violation._tag === "DuplicateWrite")
      assert.isTrue(duplicate?._tag === "DuplicateWrite" && duplicate.writes.length === 2)
      // shrunk to one delivery, whose first attempt's write outlives the timeout
      assert.strictEqual(found.scenario.deliveries.length, 1)
      const first = found.scenario.deliveries[0]!.attempts[0]!.value.downstream[0]!
      assert.isTrue(
        first._tag === "AnswerLate" && first.answerAfterMs >= 2_000,
        `the first call answers after the timeout: ${found.text}`
      )
    }
  },
  {
    name: "timeout policy `keepLease` with a downstream that does not deduplicate: the takeover writes again",
    config: { timeout: "2 seconds", onTimeout: "keepLease" },
    overrides: { downstream: { kinds: ["Succeed", "AnswerLate"] }, faults: false },
    violations: { exactly: ["DuplicateWrite"] },
    timeline: ["DownstreamTimeout (policy keepLease)", "reserve: reserved (execution 2"]
  },
  {
    name: "a crash after the downstream call, without deduplication: the lost completion leads to a second write",
    config: { timeout: "2 seconds", onTimeout: "keepLease" },
    overrides: {
      downstream: { kinds: ["Succeed"] },
      faults: { crashPoints: ["afterDownstream", "beforeComplete"], methods: [] }
    },
    violations: { exactly: ["DuplicateWrite"] },
    timeline: [/FAULT crash (after the downstream call|before complete)/]
  },
  {
    name: "failure policy `release` for an error raised after the write was applied: the retry writes again",
    config: { timeout: "2 seconds", onTimeout: "markUnknown", onTransient: "release" },
    overrides: { downstream: { kinds: ["Succeed", "ApplyThenFail"] }, faults: false },
    violations: { exactly: ["DuplicateWrite"] },
    timeline: ["then fails with Unavailable", "release: record deleted"]
  },
  {
    name: "a TTL shorter than the platform's maximum event age: a late duplicate delivery writes again",
    config: { timeout: "2 seconds", onTimeout: "markUnknown", onTransient: "store", ttl: "1 hour" },
    overrides: { downstream: { kinds: ["Succeed"] }, faults: false },
    numRuns: 500,
    violations: { exactly: ["DuplicateWrite"] },
    check: (found) => {
      const duplicate = found.scenario.deliveries.find((delivery) => delivery.source === "duplicate")
      assert.isTrue(duplicate !== undefined && duplicate.atMs >= 3_600_000, found.text)
    }
  },
  {
    name: "a deduplicating downstream that is not sent the key: the retry writes again",
    config: { timeout: "2 seconds", onTimeout: "keepLease" },
    overrides: {
      deduplicate: true,
      services: ordersApi({ forwardKey: false }),
      downstream: { kinds: ["Succeed", "AnswerLate"] },
      faults: false
    },
    violations: { exactly: ["DuplicateWrite"] }
  },
  {
    name: "a store that never lets an expired lease be taken over: the key stays blocked past its lease",
    config: { timeout: "2 seconds", onTimeout: "keepLease" },
    overrides: {
      deduplicate: true,
      faults: { crashPoints: ["afterReserve"], methods: [] },
      store: reservingAs((request) => ({ ...request, takeover: false }))
    },
    violations: { includes: "BlockedPastLease" },
    text: ["the store did not let the attempt take the key over"]
  },
  {
    name: "a store that holds leases far longer than asked: the key stays blocked past its lease",
    config: { timeout: "2 seconds", onTimeout: "keepLease" },
    overrides: {
      deduplicate: true,
      faults: { crashPoints: ["afterReserve"], methods: [] },
      store: reservingAs((request) => ({ ...request, lease: Duration.times(request.lease, 1_000) }))
    },
    violations: { includes: "BlockedPastLease" },
    text: ["IdempotencyConflict"]
  },
  {
    name: "a store that forgets recorded outcomes: the execution after the recorded outcome is flagged",
    config: { timeout: "2 seconds", onTimeout: "keepLease" },
    overrides: {
      deduplicate: true,
      faults: false,
      store: brokenStore((store) => ({
        ...store,
        complete: (request) => store.complete({ ...request, ttl: Duration.millis(1) })
      }))
    },
    violations: { exactly: ["OutcomeMismatch"] },
    text: ["executed again"]
  },
  {
    name: "a store that replays a success other than the recorded one: the replay is flagged",
    config: { timeout: "2 seconds", onTimeout: "keepLease" },
    overrides: {
      deduplicate: true,
      store: tampering((outcome) =>
        outcome._tag === "Success"
          ? IdempotencyRecord.StoredOutcome.Success({ value: JSON.stringify({ orderId: 999 }) })
          : outcome
      )
    },
    violations: { exactly: ["OutcomeMismatch"] },
    text: ["{\"orderId\":999}"]
  },
  {
    name: "a store that replays a failure other than the recorded one: the replayed failure is flagged",
    config: { timeout: "2 seconds", onTimeout: "markUnknown", onTransient: "store" },
    overrides: {
      downstream: { kinds: ["Succeed", "Fail"] },
      faults: false,
      store: tampering((outcome) =>
        outcome._tag === "Failure"
          ? IdempotencyRecord.StoredOutcome.Failure({ error: JSON.stringify({ _tag: "OrderRejected", call: 999 }) })
          : outcome
      )
    },
    violations: { only: ["OutcomeMismatch"] },
    text: ["ended with {\"_tag\":\"OrderRejected\",\"call\":999}, but attempt 1 ended with"]
  },
  {
    name: "`markUnknown` is at most once: a property that requires exactly once fails with the lost outcome",
    config: { timeout: "2 seconds", onTimeout: "markUnknown", onTransient: "store" },
    overrides: { require: "exactlyOnce", deduplicate: true },
    violations: { exactly: ["OutcomeLost"] },
    guarantee: "atMostOnce",
    timeline: ["DownstreamTimeout (policy markUnknown, replayed)"]
  }
]

/** The test of a known-bad configuration: the property fails with seed 1, its counterexample as `known` says. */
const caught = (known: KnownBad) =>
  it.effect(known.name, () =>
    Effect.gen(function*() {
      const { found, report, tags } = yield* counterexample(property(known.config, known.overrides), 1, known.numRuns)
      const expected = known.violations
      if ("exactly" in expected) assert.deepStrictEqual(tags, expected.exactly, found.text)
      else if ("only" in expected) assert.deepStrictEqual(new Set(tags), new Set(expected.only))
      else assert.include(tags, expected.includes)
      if (known.guarantee !== undefined) assert.strictEqual(report.guarantee, known.guarantee)
      for (const line of known.timeline ?? []) {
        if (typeof line === "string") assert.include(found.timeline, line)
        else assert.match(found.timeline, line)
      }
      for (const text of known.text ?? []) assert.include(found.text, text)
      known.check?.(found)
    }), TIMEOUT)

describe("RetryProperty catches known-bad configurations", () => {
  for (const known of knownBad) caught(known)

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

    it.effect(
      "is written once under timeout policy `markUnknown`",
      () =>
        Effect.gen(function*() {
          const options = property({ timeout: "2 seconds", onTimeout: "markUnknown" }, { faults: false })
          const report = yield* RetryProperty.play(options)(retriedOnce(late))
          assert.deepStrictEqual(report.violations, [], report.text)
          assert.strictEqual(report.writes, 1)
          assert.include(report.timeline, "write #1 applied, after its caller gave up")
          assert.strictEqual(report.guarantee, "atMostOnce")
        }),
      TIMEOUT
    )
  })

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
    const base = createOrder({ timeout: "2 seconds", onTimeout: "keepLease" })
    for (const [name, reshape, difference] of cases) {
      caught({
        name,
        config: { timeout: "2 seconds", onTimeout: "keepLease" },
        overrides: {
          // an operation whose replays decode to another shape than its fresh values
          operation: {
            name: base.name,
            runDetailed: (request) =>
              Effect.map(base.runDetailed(request), (result): Idempotency.Result<Created> => ({
                ...result,
                value: reshape(result.value, result.replayed) as Created
              }))
          },
          deduplicate: true,
          faults: false
        },
        violations: { exactly: ["OutcomeMismatch"] },
        text: [`for the same recorded outcome; they differ ${difference}`]
      })
    }
  })

  /** Known bad: `release` on timeout without deduplication writes again. */
  const bad = property({ timeout: "2 seconds", onTimeout: "release" }, { faults: false })

  it.effect(
    "`check` fails with the counterexample's timeline as its message, for `it.effect.prop`",
    () =>
      Effect.gen(function*() {
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
