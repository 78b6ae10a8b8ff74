/**
 * A property of an idempotent operation under a platform's retries: plays random scenarios
 * (`PlatformModel` deliveries and retries, `SimulatedDownstream` behaviours per attempt,
 * `FaultyStore` faults per attempt) under `TestClock`, and fails with a readable counterexample,
 * the shrunk timeline of events, when
 *
 * - the downstream applied a write twice (`DuplicateWrite`),
 * - an attempt returned something other than the recorded outcome (`OutcomeMismatch`),
 * - a key stayed blocked past its lease (`BlockedPastLease`),
 * - an attempt failed in a way the protocol never should (`UnexpectedFailure`), or
 * - (with `require: "exactlyOnce"`) a retry could never learn the outcome (`OutcomeLost`).
 *
 * It reports which guarantee the configuration gave over every case played:
 *
 * | guarantee | observed |
 * | --- | --- |
 * | `exactlyOnce` | never two writes, and a retry always got the outcome, without help from the downstream |
 * | `exactlyOnceWithDeduplication` | as above, but only because the downstream deduplicated a repeated call by its key |
 * | `atMostOnce` | never two writes, but some key stayed blocked with its outcome unknown (`markUnknown`) |
 * | `atLeastOnce` | some request was written twice |
 *
 * After the platform's attempts, every case ends with a probe: one more attempt, with a healthy
 * downstream, once every lease has ended. It shows what a client that tries again would get: the
 * recorded outcome, a fresh execution (and maybe a second write), or a key still blocked.
 *
 * ```ts
 * import { PlatformModel, RetryProperty } from "@effect-idempotency/testing"
 * import { assert, it } from "@effect/vitest"
 * import { Effect } from "effect"
 *
 * it.effect("create-order writes once under Lambda's retries", () =>
 *   Effect.gen(function*() {
 *     const property = RetryProperty.make({
 *       operation: createOrder, // Idempotency.make({ ... }), calling the downstream through OrdersApi
 *       payload: { sku: "A-1", quantity: 1 },
 *       platform: PlatformModel.awsLambdaAsync,
 *       deduplicate: true, // the orders API deduplicates by the forwarded Idempotency-Key
 *       services: OrdersApiSimulated // OrdersApi over SimulatedDownstream
 *     })
 *     const report = yield* RetryProperty.assert(property, { numRuns: 200 })
 *     assert.strictEqual(report.guarantee, "exactlyOnceWithDeduplication")
 *   }))
 * ```
 *
 * Or one case per fast-check run, with `it.effect.prop("...", [property.arbitrary], ([scenario]) => property.check(scenario))`.
 *
 * @since 0.1.0
 */
import type { Idempotency } from "@effect-idempotency/core"
import { IdempotencyError, IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import * as Ref from "effect/Ref"
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import * as TestContext from "effect/TestContext"
import * as TestServices from "effect/TestServices"
import { randomUUID } from "node:crypto"
import { isDeepStrictEqual } from "node:util"
import * as FaultyStore from "./FaultyStore.js"
import { describeError, describeExit, renderTimeline } from "./internal/describe.js"
import * as format from "./internal/format.js"
import type { Seen } from "./internal/observedStore.js"
import { spyStore, trackInFlight } from "./internal/observedStore.js"
import { runProbe } from "./internal/probe.js"
import * as trace from "./internal/trace.js"
import * as PlatformModel from "./PlatformModel.js"
import * as SimulatedDownstream from "./SimulatedDownstream.js"

/**
 * The guarantee a configuration gave.
 *
 * @since 0.1.0
 * @category models
 */
export type Guarantee = "exactlyOnce" | "exactlyOnceWithDeduplication" | "atMostOnce" | "atLeastOnce"

/**
 * The guarantee a property requires: `atLeastOnce` accepts duplicate writes, `atMostOnce` (the
 * default) fails on any, `exactlyOnce` also fails when a retry could never learn the outcome.
 *
 * @since 0.1.0
 * @category models
 */
export type Requirement = "exactlyOnce" | "atMostOnce" | "atLeastOnce"

const RANK: Record<Guarantee, number> = {
  atLeastOnce: 0,
  atMostOnce: 1,
  exactlyOnceWithDeduplication: 2,
  exactlyOnce: 3
}

/**
 * The weaker of two guarantees.
 *
 * @since 0.1.0
 * @category utils
 */
export const weakest = (a: Guarantee, b: Guarantee): Guarantee => RANK[a] <= RANK[b] ? a : b

/**
 * A readable name of a guarantee.
 *
 * @since 0.1.0
 * @category utils
 */
export const describeGuarantee = (guarantee: Guarantee): string => {
  switch (guarantee) {
    case "exactlyOnce":
      return "exactly once"
    case "exactlyOnceWithDeduplication":
      return "exactly once, with the downstream's deduplication"
    case "atMostOnce":
      return "at most once"
    case "atLeastOnce":
      return "at least once"
  }
}

/**
 * What one attempt of a scenario meets: the downstream's behaviours for its calls (in order; a
 * call past the list succeeds at once) and the store faults it hits.
 *
 * @since 0.1.0
 * @category models
 */
export interface AttemptPlan {
  readonly downstream: ReadonlyArray<SimulatedDownstream.Behaviour>
  readonly faults: ReadonlyArray<FaultyStore.Fault>
}

/**
 * One case of the property: what the platform does, and what each attempt meets.
 *
 * @since 0.1.0
 * @category models
 */
export type Scenario = PlatformModel.Plan<AttemptPlan>

/**
 * A one-line description of what an attempt meets.
 *
 * @since 0.1.0
 * @category utils
 */
export const describeAttemptPlan = (plan: AttemptPlan): string => {
  const parts = plan.downstream.map((behaviour, i) =>
    `${plan.downstream.length > 1 ? `call ${i + 1} ` : ""}downstream ${SimulatedDownstream.describe(behaviour)}`
  )
  for (const fault of plan.faults) parts.push(FaultyStore.describe(fault))
  return parts.length === 0 ? "no fault" : parts.join("; ")
}

/**
 * A multi-line description of a scenario.
 *
 * @since 0.1.0
 * @category utils
 */
export const describeScenario = (scenario: Scenario): string =>
  scenario.deliveries.map((delivery, d) => {
    const attempts = delivery.attempts.map((attempt, i) =>
      `    ${i === 0 ? "try 1" : `retry ${i} (${format.millis(attempt.waitMs)} after a failure)`}: ${
        describeAttemptPlan(attempt.value)
      }`
    )
    return [`  delivery ${d + 1}: ${delivery.source} at ${format.offset(delivery.atMs)}`, ...attempts].join("\n")
  }).join("\n")

const withToString = (scenario: Scenario): Scenario =>
  Object.defineProperty({ ...scenario }, FastCheck.toStringMethod, {
    value: () => `\n${describeScenario(scenario)}\n`,
    enumerable: false
  })

/**
 * A violation found in one case.
 *
 * @since 0.1.0
 * @category models
 */
export type Violation = Data.TaggedEnum<{
  DuplicateWrite: { readonly writes: ReadonlyArray<SimulatedDownstream.Write>; readonly detail: string }
  OutcomeMismatch: { readonly attempt: string; readonly detail: string }
  BlockedPastLease: { readonly attempt: string; readonly detail: string }
  UnexpectedFailure: { readonly attempt: string; readonly detail: string }
  OutcomeLost: { readonly detail: string }
}>

/**
 * Constructors and matchers of `Violation`.
 *
 * @since 0.1.0
 * @category models
 */
export const Violation = Data.taggedEnum<Violation>()

/**
 * A one-line description of a violation.
 *
 * @since 0.1.0
 * @category utils
 */
export const describeViolation = (violation: Violation): string => {
  switch (violation._tag) {
    case "DuplicateWrite":
      return `duplicate write: ${violation.detail}`
    case "OutcomeMismatch":
      return `outcome mismatch (${violation.attempt}): ${violation.detail}`
    case "BlockedPastLease":
      return `blocked past its lease (${violation.attempt}): ${violation.detail}`
    case "UnexpectedFailure":
      return `unexpected failure (${violation.attempt}): ${violation.detail}`
    case "OutcomeLost":
      return `outcome lost: ${violation.detail}`
  }
}

/**
 * The result of one case.
 *
 * @since 0.1.0
 * @category models
 */
export interface CaseReport {
  readonly scenario: Scenario
  readonly violations: ReadonlyArray<Violation>
  /** The guarantee this case is consistent with. */
  readonly guarantee: Guarantee
  /** Attempts played, the probe included. */
  readonly attempts: number
  /** Writes the downstream applied. */
  readonly writes: number
  /** Calls the downstream deduplicated by their key. */
  readonly deduplicated: number
  /** Whether the probe found the key blocked with its outcome unknown. */
  readonly outcomeLost: boolean
  /** The events of the case, one per line, with times relative to its start. */
  readonly timeline: string
  /** The violations, the scenario and the timeline, for a failure message. */
  readonly text: string
}

/**
 * Totals over the cases a property played.
 *
 * @since 0.1.0
 * @category models
 */
export interface Summary {
  readonly cases: number
  /** The weakest guarantee over every case played (`exactlyOnce` before any case). */
  readonly guarantee: Guarantee
  readonly casesWithDuplicates: number
  readonly casesDeduplicated: number
  readonly casesWithOutcomeLost: number
  readonly casesWithViolations: number
}

/**
 * The property failed: the message holds the counterexample.
 *
 * @since 0.1.0
 * @category errors
 */
export class RetryPropertyFailure extends Schema.TaggedError<RetryPropertyFailure>(
  "@effect-idempotency/testing/RetryPropertyFailure"
)("RetryPropertyFailure", {
  operation: Schema.String,
  violations: Schema.Array(Schema.String),
  guarantee: Schema.Literal("exactlyOnce", "exactlyOnceWithDeduplication", "atMostOnce", "atLeastOnce"),
  text: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return this.text
  }
}

/**
 * The definition of the property.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<P, A, E, R, ROut = never, RS = never> {
  /** The operation under test (from `Idempotency.make`). */
  readonly operation: Idempotency.Operation<P, A, E, R>
  /** The request every delivery sends, with one key. */
  readonly payload: P
  /** The request's scope (a tenant id), if the operation uses one. */
  readonly scope?: string | undefined
  readonly platform: PlatformModel.Platform
  /** Whether the simulated downstream deduplicates by the forwarded key. */
  readonly deduplicate: boolean
  /**
   * The services the operation calls, built over the simulated downstream (for example the
   * application's `OrdersApi` tag, implemented with `SimulatedDownstream.call`). Built per case.
   */
  readonly services?: Layer.Layer<ROut, never, SimulatedDownstream.SimulatedDownstream> | undefined
  /**
   * The store each case uses. Default: a fresh memory store per case. Pass
   * `IdempotencyStore.IdempotencyStore` to use the store of the context (a real store: every case
   * uses a key of its own).
   */
  readonly store?: Effect.Effect<IdempotencyStore.IdempotencyStore["Type"], never, RS> | undefined
  /** The downstream behaviours drawn per attempt. */
  readonly downstream?: {
    /** Codes of scripted failures (map them to your API's errors in `services`). Default `["Unavailable"]`. */
    readonly failures?: ReadonlyArray<string> | undefined
    /** Kinds of behaviour drawn. Default: all. */
    readonly kinds?: ReadonlyArray<SimulatedDownstream.Behaviour["_tag"]> | undefined
    /** The longest latency drawn. Default: 1.5 times the platform's time limit. */
    readonly maxLatency?: Duration.DurationInput | undefined
    /** How many downstream calls of an attempt get a drawn behaviour; later calls succeed at once. Default 1. */
    readonly calls?: number | undefined
  } | undefined
  /**
   * The store faults drawn per attempt (crashes at named points, unavailability, stalls up to the
   * platform's `stalls`); `false` for none. Default: all.
   */
  readonly faults?: boolean | Partial<FaultyStore.ArbitraryOptions> | undefined
  /** The guarantee the property requires. Default `atMostOnce`: a duplicate write fails it. */
  readonly require?: Requirement | undefined
  /**
   * Pass each attempt's remaining time less this margin as the request's `timeout`, as the
   * serverless adapters do. Default: the operation's own timeout.
   */
  readonly deadlineMargin?: Duration.DurationInput | undefined
  /** Whether the platform retries after an attempt's outcome. Default: after anything but a success. */
  readonly retryOn?:
    | ((outcome: PlatformModel.AttemptOutcome<Idempotency.Result<A>, E | IdempotencyError.IdempotencyError>) => boolean)
    | undefined
  /**
   * Where `TestClock` starts in each case: `zero`, or the wall clock (`wall`, for stores that keep
   * native expiry, such as DynamoDB's TTL). Default: `zero` with the memory store, `wall` otherwise.
   */
  readonly clock?: "zero" | "wall" | undefined
  /**
   * Move `TestClock` one wake-up at a time, only while no store request is in flight, so that
   * simulated time never passes during real I/O (slower). Default: on for a store other than the
   * default memory store.
   */
  readonly stepwise?: boolean | undefined
}

/**
 * A property, ready to play cases.
 *
 * @since 0.1.0
 * @category models
 */
export interface Property<R> {
  readonly name: string
  /** A one-line description of the configuration under test. */
  readonly description: string
  /** The scenarios, for `it.effect.prop` or `run`. */
  readonly arbitrary: FastCheck.Arbitrary<Scenario>
  /** Plays one case under the `TestClock` of the context (the case's own logs are silenced). */
  readonly play: (scenario: Scenario) => Effect.Effect<CaseReport, never, R>
  /**
   * Plays one case and fails with the counterexample when it found a violation (it succeeds with
   * nothing, as fast-check's predicates must).
   */
  readonly check: (scenario: Scenario) => Effect.Effect<void, RetryPropertyFailure, R>
  /** Totals over every case this property played so far. */
  readonly summary: Effect.Effect<Summary>
}

const UNEXPECTED: ReadonlySet<string> = new Set([
  "InvalidIdempotencyKey",
  "InvalidPayload",
  "KeyReused",
  "StoreError",
  "StoredOutcomeInvalid"
])

interface Played<A, E> {
  readonly label: string
  readonly startedAt: number
  readonly endedAt: number
  readonly outcome: PlatformModel.AttemptOutcome<Idempotency.Result<A>, E>
}

const HEALTHY: AttemptPlan = { downstream: [], faults: [] }

/** The summary of no cases. */
const emptySummary: Summary = {
  cases: 0,
  guarantee: "exactlyOnce",
  casesWithDuplicates: 0,
  casesDeduplicated: 0,
  casesWithOutcomeLost: 0,
  casesWithViolations: 0
}

/**
 * The checks of one case: no request written twice, every attempt returns the recorded outcome or
 * a failure the protocol allows, and no key is blocked past the leases the operation asked for.
 */
const findViolations = <A, E>(input: {
  readonly played: ReadonlyArray<Played<A, E>>
  readonly seen: Seen
  readonly duplicates: ReadonlyArray<ReadonlyArray<SimulatedDownstream.Write>>
  readonly requirement: Requirement
  readonly start: number
  readonly leaseUntil: number
}): { readonly violations: ReadonlyArray<Violation>; readonly outcomeLost: boolean } => {
  const { duplicates, leaseUntil, played, requirement, seen, start } = input
  const violations: Array<Violation> = []
  const at = (ms: number) => format.offset(ms - start)

  // 1. no request is written twice
  for (const group of duplicates) {
    if (requirement === "atLeastOnce") break
    const first = group[0]!
    violations.push(Violation.DuplicateWrite({
      writes: group,
      detail: `the downstream applied ${first.endpoint} ${format.short(first.body, 60)} ${group.length} times: ${
        group.map((write) => `write #${write.id} at ${at(write.at)} (${write.attempt ?? "outside any attempt"})`)
          .join(", ")
      }`
    }))
  }

  // 2. no execution starts while a recorded outcome is live
  for (const reserve of seen.reserves) {
    if (reserve.result._tag !== "Reserved") continue
    const live = seen.completions.find((completion) =>
      completion.seq < reserve.seq && reserve.at < completion.expiresAt
    )
    if (live !== undefined) {
      violations.push(Violation.OutcomeMismatch({
        attempt: reserve.attempt ?? "an attempt",
        detail: `executed again at ${at(reserve.at)} although ${live.attempt ?? "an attempt"} recorded the outcome at ${
          at(live.at)
        } (${live.outcome._tag})`
      }))
    }
  }

  // 3. every attempt returns the recorded outcome, or a failure the protocol allows
  const lastReserve = (label: string) => {
    const mine = seen.reserves.filter((reserve) => reserve.attempt === label)
    return mine[mine.length - 1]
  }
  const groups = new Map<string, Array<{ readonly label: string; readonly value: A }>>()
  const addToGroup = (token: string, label: string, value: A) => {
    const group = groups.get(token)
    if (group === undefined) groups.set(token, [{ label, value }])
    else group.push({ label, value })
  }
  let outcomeLost = false
  for (const attempt of played) {
    if (attempt.outcome._tag === "Killed") continue
    const exit = attempt.outcome.exit
    const reserve = lastReserve(attempt.label)
    const existing = reserve?.result._tag === "Existing" ? reserve.result.record : undefined
    if (Exit.isSuccess(exit)) {
      const result = exit.value
      if (result.replayed) {
        if (existing === undefined || existing.status !== "COMPLETED" || existing.outcome?._tag !== "Success") {
          violations.push(Violation.OutcomeMismatch({
            attempt: attempt.label,
            detail: `returned ${format.short(result.value)} as a replay, but the store held no recorded success`
          }))
        } else {
          addToGroup(existing.token, attempt.label, result.value)
        }
      } else if (reserve !== undefined && reserve.result._tag === "Reserved") {
        const token = reserve.result.token
        const recorded = seen.completions.find((completion) => completion.token === token)
        if (recorded !== undefined && recorded.outcome._tag === "Success") {
          addToGroup(recorded.token, attempt.label, result.value)
        }
      }
      continue
    }
    if (Cause.isInterruptedOnly(exit.cause)) continue
    const failure = Cause.failureOption(exit.cause)
    if (Option.isNone(failure)) {
      // a defect the simulated downstream was scripted to die with is the downstream's exit
      const scripted = Cause.defects(exit.cause)
      if (scripted.length > 0 && Array.from(scripted).every((d) => d instanceof SimulatedDownstream.SimulatedDefect)) {
        continue
      }
      violations.push(Violation.UnexpectedFailure({
        attempt: attempt.label,
        detail: `died: ${Cause.pretty(exit.cause).split("\n")[0]}`
      }))
      continue
    }
    const error = failure.value
    if (IdempotencyError.isIdempotencyError(error)) {
      if (UNEXPECTED.has(error._tag)) {
        violations.push(Violation.UnexpectedFailure({ attempt: attempt.label, detail: describeError(error) }))
      } else if (error._tag === "DownstreamTimeout" && error.replayed && error.policy !== "markUnknown") {
        violations.push(Violation.BlockedPastLease({
          attempt: attempt.label,
          detail: `the lease had ended, but the store did not let the attempt take the key over (${
            describeError(error)
          })`
        }))
      } else if (attempt.label === "probe" && error._tag === "IdempotencyConflict") {
        violations.push(Violation.BlockedPastLease({
          attempt: attempt.label,
          detail: `still ${describeError(error)} at ${at(attempt.startedAt)}, after every lease had ended (${
            at(leaseUntil)
          })`
        }))
      } else if (attempt.label === "probe" && error._tag === "DownstreamTimeout" && error.replayed) {
        outcomeLost = true
      } else if (attempt.label === "probe") {
        violations.push(Violation.UnexpectedFailure({
          attempt: attempt.label,
          detail: `failed with a healthy downstream and store: ${describeError(error)}`
        }))
      }
    } else if (existing !== undefined && existing.status === "COMPLETED" && existing.outcome?._tag === "Success") {
      violations.push(Violation.OutcomeMismatch({
        attempt: attempt.label,
        detail: `failed with ${describeError(error)} although the recorded outcome is a success`
      }))
    }
  }
  for (const group of groups.values()) {
    const [first, ...rest] = group
    for (const other of rest) {
      if (!isDeepStrictEqual(first!.value, other.value)) {
        violations.push(Violation.OutcomeMismatch({
          attempt: other.label,
          detail: `returned ${format.short(other.value)}, but ${first!.label} returned ${
            format.short(first!.value)
          } for the same recorded outcome`
        }))
      }
    }
  }
  if (outcomeLost && requirement === "exactlyOnce") {
    violations.push(Violation.OutcomeLost({
      detail: "after every lease had ended, the key stayed blocked with its outcome unknown (markUnknown)"
    }))
  }
  return { violations, outcomeLost }
}

/**
 * Builds the property of an operation.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <P, A, E, R, ROut = never, RS = never>(
  options: Options<P, A, E, R, ROut, RS>
): Property<Exclude<R, ROut | SimulatedDownstream.SimulatedDownstream | IdempotencyStore.IdempotencyStore> | RS> => {
  const operation = options.operation
  const platform = options.platform
  const requirement: Requirement = options.require ?? "atMostOnce"
  const timeLimitMs = PlatformModel.timeLimitMillis(platform)
  const clockStart = options.clock ?? (options.store === undefined ? "zero" : "wall")
  const stepwise = options.stepwise ?? options.store !== undefined
  const margin = options.deadlineMargin === undefined ? undefined : Duration.decode(options.deadlineMargin)

  const behaviour = SimulatedDownstream.arbitrary({
    maxLatency: options.downstream?.maxLatency ?? Duration.millis(Math.round(timeLimitMs * 1.5)),
    failures: options.downstream?.failures,
    kinds: options.downstream?.kinds
  })
  const faultOptions = options.faults === undefined || options.faults === true
    ? {}
    : options.faults === false
    ? undefined
    : options.faults
  const faults = faultOptions === undefined
    ? FastCheck.constant<ReadonlyArray<FaultyStore.Fault>>([])
    : FaultyStore.arbitrary({ maxLatency: PlatformModel.stallMillis(platform), ...faultOptions })
  const attemptPlan: FastCheck.Arbitrary<AttemptPlan> = FastCheck.record({
    downstream: FastCheck.array(behaviour, { minLength: 1, maxLength: Math.max(1, options.downstream?.calls ?? 1) }),
    faults
  })
  const arbitrary = PlatformModel.arbitrary(platform, attemptPlan).map(withToString)

  const description = `${operation.name} on ${PlatformModel.describe(platform)}; the downstream ${
    options.deduplicate ? "deduplicates by the forwarded key" : "does not deduplicate"
  }`

  const summaryRef = Ref.unsafeMake<Summary>(emptySummary)

  const storeEffect: Effect.Effect<IdempotencyStore.IdempotencyStore["Type"], never, RS> = options.store ??
    IdempotencyStore.makeMemory({ warn: false })

  const play = (scenario: Scenario, caseTrace: trace.Trace) =>
    Effect.gen(function*() {
      if (clockStart === "wall") {
        yield* TestClock.setTime(yield* TestServices.provideLive(Clock.currentTimeMillis))
      }
      const start = yield* Clock.currentTimeMillis
      const seen: Seen = { seq: 0, reserves: [], completions: [], leaseEnd: start }
      const base = yield* storeEffect
      const tracked = trackInFlight(base)
      const { store } = yield* FaultyStore.make(spyStore(tracked.store, start, seen))
      const downstream = yield* SimulatedDownstream.make({ deduplicate: options.deduplicate })
      const downstreamContext = Context.make(SimulatedDownstream.SimulatedDownstream, downstream)
      const services = options.services === undefined
        ? Context.empty() as Context.Context<ROut>
        : yield* Layer.build(options.services).pipe(Effect.provide(downstreamContext))
      const context = Context.merge(
        Context.add(downstreamContext, IdempotencyStore.IdempotencyStore, store),
        services
      )
      const key = `retry-property-${randomUUID()}`
      const recordId = IdempotencyRecord.makeRecordId({
        operation: operation.name,
        key: IdempotencyKey.unsafeMake(key),
        scope: options.scope
      })

      const invoke = (attempt: PlatformModel.AttemptContext<AttemptPlan>) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const timeout = margin === undefined
            ? undefined
            : Duration.millis(Math.max(0, attempt.deadline - now - Duration.toMillis(margin)))
          return yield* operation.runDetailed({
            key,
            payload: options.payload,
            ...(options.scope === undefined ? {} : { scope: options.scope }),
            ...(timeout === undefined ? {} : { timeout })
          })
        }).pipe(
          SimulatedDownstream.scripted(attempt.value.downstream),
          FaultyStore.withFaults(attempt.value.faults),
          Effect.provide(context)
        )

      const playOptions = {
        describe: (
          outcome: PlatformModel.AttemptOutcome<Idempotency.Result<A>, E | IdempotencyError.IdempotencyError>
        ) =>
          outcome._tag === "Killed"
            ? `stopped by the platform at its time limit (${format.millis(timeLimitMs)})`
            : describeExit(outcome.exit),
        ...(options.retryOn === undefined ? {} : { retryOn: options.retryOn }),
        ...(stepwise ? { settle: tracked.settle } : {})
      }
      const attempts = yield* PlatformModel.play(scenario, invoke, playOptions)
      const played: Array<Played<A, E | IdempotencyError.IdempotencyError>> = attempts.map((attempt) => ({
        label: `attempt ${attempt.id}`,
        startedAt: attempt.startedAt,
        endedAt: attempt.endedAt,
        outcome: attempt.outcome
      }))

      // The probe: one more attempt with a healthy downstream, from the moment the last attempt
      // ended (the platform's retry windows may have run on past it), or, if the key is still in
      // progress, once every lease the operation asked for has ended.
      const lastEnd = played.reduce((max, attempt) => Math.max(max, attempt.endedAt), start)
      const now = yield* Clock.currentTimeMillis
      const current = yield* Effect.either(base.get(recordId))
      const inProgress = current._tag === "Left" ||
        (Option.isSome(current.right) && current.right.value.status === "IN_PROGRESS")
      const leaseUntil = inProgress ? seen.leaseEnd : lastEnd
      const probeAt = Math.max(lastEnd, leaseUntil)
      // the clock stays where it is when that changes nothing: the record reads the same at both times
      const unchanged = current._tag === "Right" && Option.isSome(current.right) &&
        (!inProgress || leaseUntil <= now)
      if (!unchanged && probeAt !== now) yield* TestClock.setTime(probeAt)
      const probeStart = yield* Clock.currentTimeMillis
      yield* trace.record(
        "probe",
        leaseUntil > lastEnd
          ? `probe: a client tries again once the lease has ended (${format.offset(leaseUntil - start)})`
          : "probe: a client tries again"
      ).pipe(Effect.locally(trace.currentAttempt, "probe"))
      const probe = yield* runProbe(
        invoke({
          id: 0,
          delivery: 0,
          source: "resend",
          try: 1,
          value: HEALTHY,
          startedAt: probeStart,
          deadline: probeStart + scenario.timeLimitMs
        }),
        scenario.timeLimitMs,
        stepwise ? tracked.settle : undefined,
        playOptions.describe
      )
      played.push({ label: "probe", startedAt: probeStart, endedAt: probe.endedAt, outcome: probe.outcome })

      const calls = yield* downstream.calls
      const writes = yield* downstream.writes
      const duplicates = yield* downstream.duplicates
      const { outcomeLost, violations } = findViolations({
        played,
        seen,
        duplicates,
        requirement,
        start,
        leaseUntil
      })

      const deduplicated = calls.filter((call) => call.effect === "deduplicated").length
      const guarantee: Guarantee = duplicates.length > 0
        ? "atLeastOnce"
        : outcomeLost
        ? "atMostOnce"
        : deduplicated > 0
        ? "exactlyOnceWithDeduplication"
        : "exactlyOnce"

      const timeline = renderTimeline(caseTrace, start)
      const report: CaseReport = {
        scenario,
        violations,
        guarantee,
        attempts: played.length,
        writes: writes.length,
        deduplicated,
        outcomeLost,
        timeline,
        text: [
          `Retry property of ${description}`,
          violations.length === 0
            ? "No violation."
            : ["Violations:", ...violations.map((violation) => `  - ${describeViolation(violation)}`)].join("\n"),
          `This case gives: ${describeGuarantee(guarantee)}.`,
          "Scenario:",
          describeScenario(scenario),
          "Timeline:",
          timeline
        ].join("\n")
      }
      yield* Ref.update(summaryRef, (summary) => tally(summary, report))
      return report
    }).pipe(
      Effect.scoped,
      Effect.locally(trace.currentTrace, caseTrace),
      Logger.withMinimumLogLevel(LogLevel.None)
    )

  const playCase = (scenario: Scenario) => Effect.suspend(() => play(scenario, trace.makeTrace()))

  const check = (scenario: Scenario) =>
    Effect.flatMap(playCase(scenario), (report) =>
      report.violations.length === 0
        ? Effect.void
        : Effect.fail(
          new RetryPropertyFailure({
            operation: operation.name,
            violations: report.violations.map(describeViolation),
            guarantee: report.guarantee,
            text: report.text
          })
        ))

  return {
    name: operation.name,
    description,
    arbitrary,
    play: playCase,
    check,
    summary: Ref.get(summaryRef)
  }
}

const tally = (summary: Summary, report: CaseReport): Summary => ({
  cases: summary.cases + 1,
  guarantee: weakest(summary.guarantee, report.guarantee),
  casesWithDuplicates: summary.casesWithDuplicates + (report.guarantee === "atLeastOnce" ? 1 : 0),
  casesDeduplicated: summary.casesDeduplicated + (report.deduplicated > 0 ? 1 : 0),
  casesWithOutcomeLost: summary.casesWithOutcomeLost + (report.outcomeLost ? 1 : 0),
  casesWithViolations: summary.casesWithViolations + (report.violations.length > 0 ? 1 : 0)
})

/**
 * How many cases `run` plays, and with which seed.
 *
 * @since 0.1.0
 * @category models
 */
export interface Parameters {
  /** Cases to play. Default 100. */
  readonly numRuns?: number | undefined
  /**
   * How many fast-check runs share the cases, each with a seed of its own, played concurrently
   * (each case waits on its own `TestClock`, so concurrent cases overlap their waits). Default 8.
   */
  readonly concurrency?: number | undefined
  /** The base seed: each concurrent run derives its own from it. With `path`, the seed of the run to replay. */
  readonly seed?: number | undefined
  /** fast-check's path of one case: with `seed`, replays that case alone (as a counterexample tells). */
  readonly path?: string | undefined
}

/**
 * The counterexample of a failed run: the shrunk scenario and its report.
 *
 * @since 0.1.0
 * @category models
 */
export interface Counterexample {
  readonly scenario: Scenario
  readonly report: CaseReport
  readonly shrinks: number
  /** Replays this case with `{ seed, path }`. */
  readonly seed: number
  readonly path: string
}

/**
 * The result of `run`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Report {
  readonly passed: boolean
  /** The guarantee over every case played (shrinking included). */
  readonly guarantee: Guarantee
  /** Cases played before a failure, or all of them (shrinking excluded). */
  readonly numRuns: number
  /** Totals over every case played, shrinking included. */
  readonly summary: Summary
  readonly counterexample: Counterexample | undefined
  /** A readable account: the guarantee, or the counterexample. */
  readonly text: string
}

/** The seed of the `index`-th run: a mix of the base seed and the index, so that runs of nearby seeds differ. */
const shardSeed = (seed: number, index: number): number => {
  let h = Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(index + 1, 0xc2b2ae35)
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b)
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
  return (h ^ (h >>> 16)) | 0
}

/**
 * Runs the property with fast-check: plays `numRuns` cases, each on a fresh `TestClock`, and on a
 * violation shrinks the scenario to a minimal counterexample. Never fails: the report says
 * whether the property held.
 *
 * @since 0.1.0
 * @category running
 */
export const run = <R>(property: Property<R>, parameters?: Parameters): Effect.Effect<Report, never, R> =>
  Effect.gen(function*() {
    const runtime = yield* Effect.runtime<R>()
    const numRuns = Math.max(1, parameters?.numRuns ?? 100)
    const shards = parameters?.path === undefined
      ? Math.max(1, Math.min(numRuns, Math.floor(parameters?.concurrency ?? 8)))
      : 1
    const seed = parameters?.seed ?? (yield* Random.nextIntBetween(-(2 ** 31), 2 ** 31 - 1))
    let summary = emptySummary
    // the first run to find a violation shrinks it; the other runs stop playing cases
    let owner: number | undefined
    // fast-check drives the cases through promises: each case runs on this fiber's runtime, with a
    // fresh TestClock of its own
    const runCase = (shard: number) => (scenario: Scenario): Promise<boolean> =>
      owner !== undefined && owner !== shard
        ? Promise.resolve(true)
        : Runtime.runPromise(runtime)(Effect.provide(property.play(scenario), TestContext.TestContext)).then(
          (report) => {
            summary = tally(summary, report)
            if (report.violations.length === 0) return true
            owner = owner ?? shard
            return false
          }
        )
    const results = yield* Effect.forEach(
      Array.from({ length: shards }, (_, i) => i),
      (i) => {
        const seedOfRun = shards === 1 ? seed : shardSeed(seed, i)
        const shardRuns = Math.floor(numRuns / shards) + (i < numRuns % shards ? 1 : 0)
        return Effect.map(
          Effect.promise(() =>
            FastCheck.check(FastCheck.asyncProperty(property.arbitrary, runCase(i)), {
              numRuns: shardRuns,
              seed: seedOfRun,
              ...(parameters?.path === undefined ? {} : { path: parameters.path })
            })
          ),
          (details) => ({ seed: seedOfRun, details })
        )
      },
      { concurrency: "unbounded" }
    )
    const played = results.reduce((sum, result) => sum + result.details.numRuns, 0)
    const failed = owner === undefined ? undefined : results[owner]
    if (failed === undefined) {
      return {
        passed: true,
        guarantee: summary.guarantee,
        numRuns: played,
        summary,
        counterexample: undefined,
        text: `Retry property of ${property.description}: ${played} cases passed; the configuration gives ${
          describeGuarantee(summary.guarantee)
        }.`
      } satisfies Report
    }
    const details = failed.details
    if (details.counterexample === null) {
      return {
        passed: false,
        guarantee: summary.guarantee,
        numRuns: played,
        summary,
        counterexample: undefined,
        text: `Retry property of ${property.description}: fast-check failed: ${String(details.errorInstance)}`
      } satisfies Report
    }
    const [scenario] = details.counterexample
    // replay the shrunk case for its report
    const report = yield* Effect.provide(property.play(scenario), TestContext.TestContext)
    const counterexample: Counterexample = {
      scenario,
      report,
      shrinks: details.numShrinks,
      seed: failed.seed,
      path: details.counterexamplePath ?? ""
    }
    return {
      passed: false,
      guarantee: weakest(summary.guarantee, report.guarantee),
      numRuns: played,
      summary,
      counterexample,
      text: [
        `Counterexample after ${played} case(s), shrunk ${details.numShrinks} time(s) (replay with seed ${failed.seed}, path "${counterexample.path}").`,
        report.text
      ].join("\n")
    } satisfies Report
  })

/**
 * Runs the property and fails with `RetryPropertyFailure` (its message is the counterexample)
 * when it does not hold.
 *
 * @since 0.1.0
 * @category running
 */
export const assert = <R>(
  property: Property<R>,
  parameters?: Parameters
): Effect.Effect<Report, RetryPropertyFailure, R> =>
  Effect.flatMap(run(property, parameters), (report) =>
    report.passed
      ? Effect.succeed(report)
      : Effect.fail(
        new RetryPropertyFailure({
          operation: property.name,
          violations: report.counterexample?.report.violations.map(describeViolation) ?? [],
          guarantee: report.guarantee,
          text: report.text
        })
      ))
