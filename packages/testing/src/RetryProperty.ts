/**
 * A property of an idempotent operation under a platform's retries, composed with fast-check's own
 * runner: `arbitrary` draws scenarios, `check` plays one and fails with its timeline
 * (README.md#property-test-your-operation-under-retries).
 *
 * @example
 * ```ts
 * import type { Idempotency } from "@effect-idempotency/core"
 * import type { SimulatedDownstream } from "@effect-idempotency/testing"
 * import { PlatformModel, RetryProperty } from "@effect-idempotency/testing"
 * import { it } from "@effect/vitest"
 * import type { Layer } from "effect"
 *
 * // the application's OrdersApi client, and the operation that calls it
 * interface OrdersApi {
 *   readonly create: unknown
 * }
 * declare const createOrder: Idempotency.Operation<{ sku: string; quantity: number }, { orderId: string }, never, OrdersApi>
 * // OrdersApi over SimulatedDownstream (see SimulatedDownstream)
 * declare const OrdersApiSimulated: Layer.Layer<OrdersApi, never, SimulatedDownstream.SimulatedDownstream>
 *
 * const property = {
 *   operation: createOrder, // Idempotency.make({ ... }), calling the downstream through OrdersApi
 *   payload: { sku: "A-1", quantity: 1 },
 *   platform: PlatformModel.awsLambdaAsync,
 *   deduplicate: true, // the orders API deduplicates by the forwarded Idempotency-Key
 *   services: OrdersApiSimulated // OrdersApi over SimulatedDownstream
 * }
 *
 * it.effect.prop("create-order writes once", [RetryProperty.arbitrary(property)], ([scenario]) =>
 *   RetryProperty.check(property)(scenario), { fastCheck: { numRuns: 200 } })
 * ```
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
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import * as TestContext from "effect/TestContext"
import * as TestServices from "effect/TestServices"
import { isDeepStrictEqual } from "node:util"
import * as FaultyStore from "./FaultyStore.js"
import { describeError, describeExit, renderTimeline } from "./internal/describe.js"
import * as format from "./internal/format.js"
import type { Seen } from "./internal/observedStore.js"
import { spyStore, trackInFlight } from "./internal/observedStore.js"
import { runProbe } from "./internal/probe.js"
import { stepwise as moveStepwise } from "./internal/stepwise.js"
import * as trace from "./internal/trace.js"
import * as PlatformModel from "./PlatformModel.js"
import * as SimulatedDownstream from "./SimulatedDownstream.js"

/**
 * The guarantee a configuration gave (README.md#the-guarantee-it-reports).
 *
 * @since 0.1.0
 * @category models
 */
export type Guarantee = "exactlyOnce" | "exactlyOnceWithDeduplication" | "atMostOnce" | "atLeastOnce"

/**
 * The guarantee a property requires; a weaker one observed fails it.
 *
 * @since 0.1.0
 * @category models
 */
export type Requirement = "exactlyOnce" | "atMostOnce" | "atLeastOnce"

const GUARANTEES: Record<Guarantee, string> = {
  atLeastOnce: "at least once",
  atMostOnce: "at most once",
  exactlyOnceWithDeduplication: "exactly once, with the downstream's deduplication",
  exactlyOnce: "exactly once"
}

const weakest = (a: Guarantee, b: Guarantee): Guarantee => {
  const rank = Object.keys(GUARANTEES)
  return rank.indexOf(a) <= rank.indexOf(b) ? a : b
}

/**
 * What one attempt meets: the downstream's behaviours for its calls, and its store faults.
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

const describeScenario = (scenario: Scenario): string =>
  scenario.deliveries.map((delivery, d) =>
    [
      `  delivery ${d + 1}: ${delivery.source} at ${format.offset(delivery.atMs)}`,
      ...delivery.attempts.map(({ value, waitMs }, i) => {
        const calls = value.downstream.map((behaviour, call) =>
          `${value.downstream.length > 1 ? `call ${call + 1} ` : ""}downstream ${
            SimulatedDownstream.describe(behaviour)
          }`
        )
        const meets = [...calls, ...value.faults.map(FaultyStore.describe)]
        return `    ${i === 0 ? "try 1" : `retry ${i} (${format.millis(waitMs)} after a failure)`}: ${
          meets.length === 0 ? "no fault" : meets.join("; ")
        }`
      })
    ].join("\n")
  ).join("\n")

/**
 * A violation found in one case (README.md#what-fails-it).
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

const describeViolation: (violation: Violation) => string = Violation.$match({
  DuplicateWrite: ({ detail }) => `duplicate write: ${detail}`,
  OutcomeMismatch: ({ attempt, detail }) => `outcome mismatch (${attempt}): ${detail}`,
  BlockedPastLease: ({ attempt, detail }) => `blocked past its lease (${attempt}): ${detail}`,
  UnexpectedFailure: ({ attempt, detail }) => `unexpected failure (${attempt}): ${detail}`,
  OutcomeLost: ({ detail }) => `outcome lost: ${detail}`
})

/**
 * The result of one case.
 *
 * @since 0.1.0
 * @category models
 */
export interface CaseReport {
  readonly scenario: Scenario
  readonly violations: ReadonlyArray<Violation>
  readonly guarantee: Guarantee
  readonly writes: number
  /** Calls the downstream deduplicated by their key. */
  readonly deduplicated: number
  /** Whether the probe found the key blocked with its outcome unknown. */
  readonly outcomeLost: boolean
  readonly timeline: string
  /** The violations, the scenario and the timeline. */
  readonly text: string
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
 * What the scenarios are drawn from (README.md#options).
 *
 * @since 0.1.0
 * @category models
 */
export interface ScenarioOptions {
  readonly platform: PlatformModel.Platform
  readonly downstream?: {
    readonly failures?: ReadonlyArray<string> | undefined
    readonly kinds?: ReadonlyArray<SimulatedDownstream.Behaviour["_tag"]> | undefined
    readonly maxLatency?: Duration.DurationInput | undefined
    readonly calls?: number | undefined
  } | undefined
  readonly faults?: boolean | Partial<FaultyStore.ArbitraryOptions> | undefined
}

/**
 * The definition of the property (README.md#options).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<P, A, E, R, ROut = never, RS = never> extends ScenarioOptions {
  readonly operation: Pick<Idempotency.Operation<P, A, E, R>, "name" | "runDetailed">
  readonly payload: P
  readonly scope?: string | undefined
  readonly deduplicate: boolean | ReadonlyArray<string>
  readonly services?: Layer.Layer<ROut, never, SimulatedDownstream.SimulatedDownstream> | undefined
  /** Default: a fresh memory store per case; see README.md#on-a-real-store. */
  readonly store?: Effect.Effect<IdempotencyStore.IdempotencyStore["Type"], never, RS> | undefined
  readonly require?: Requirement | undefined
  readonly deadlineMargin?: Duration.DurationInput | undefined
}

/**
 * What a case of the property needs from the context.
 *
 * @since 0.1.0
 * @category models
 */
export type Requirements<R, ROut, RS> =
  | Exclude<R, ROut | SimulatedDownstream.SimulatedDownstream | IdempotencyStore.IdempotencyStore>
  | RS

/**
 * The scenarios of a property, shrinking toward fewer deliveries, healthy calls and no faults.
 *
 * @since 0.1.0
 * @category arbitraries
 */
export const arbitrary = (options: ScenarioOptions): FastCheck.Arbitrary<Scenario> => {
  const { downstream, faults, platform } = options
  const behaviour = SimulatedDownstream.arbitrary({
    maxLatency: downstream?.maxLatency ?? Duration.millis(Math.round(PlatformModel.timeLimitMillis(platform) * 1.5)),
    failures: downstream?.failures,
    kinds: downstream?.kinds
  })
  const attempt: FastCheck.Arbitrary<AttemptPlan> = FastCheck.record({
    downstream: FastCheck.array(behaviour, { minLength: 1, maxLength: Math.max(1, downstream?.calls ?? 1) }),
    faults: faults === false
      ? FastCheck.constant([])
      : FaultyStore.arbitrary({ maxLatency: PlatformModel.stallMillis(platform), ...(faults === true ? {} : faults) })
  })
  return PlatformModel.arbitrary(platform, attempt).map((scenario) =>
    Object.defineProperty({ ...scenario }, FastCheck.toStringMethod, {
      value: () => `\n${describeScenario(scenario)}\n`
    })
  )
}

const UNEXPECTED: ReadonlyArray<string> = [
  "InvalidIdempotencyKey",
  "InvalidPayload",
  "KeyReused",
  "StoreError",
  "StoredOutcomeInvalid"
]

type Ending = PlatformModel.AttemptOutcome<Idempotency.Result<unknown>, unknown>

interface Played {
  readonly label: string
  readonly outcome: Ending
}

const findViolations = (input: {
  readonly played: ReadonlyArray<Played>
  readonly seen: Seen
  readonly writes: ReadonlyArray<SimulatedDownstream.Write>
  readonly requirement: Requirement
  readonly start: number
  readonly probeAt: number
}): { readonly violations: ReadonlyArray<Violation>; readonly outcomeLost: boolean } => {
  const { played, probeAt, requirement, seen, start, writes } = input
  const violations: Array<Violation> = []
  const at = (ms: number) => format.offset(ms - start)

  for (const group of requirement === "atLeastOnce" ? [] : SimulatedDownstream.duplicates(writes)) {
    const { body, endpoint } = group[0]!
    const each = group.map((write) =>
      `write #${write.id} at ${at(write.at)} (${write.attempt ?? "outside any attempt"})`
    )
    violations.push(Violation.DuplicateWrite({
      writes: group,
      detail: `the downstream applied ${endpoint} ${format.short(body, 60)} ${group.length} times: ${each.join(", ")}`
    }))
  }

  for (const reserve of seen.reserves) {
    const live = seen.completions.find((completion) =>
      completion.seq < reserve.seq && reserve.at < completion.expiresAt
    )
    if (reserve.result._tag === "Reserved" && live !== undefined) {
      violations.push(Violation.OutcomeMismatch({
        attempt: reserve.attempt ?? "an attempt",
        detail: `executed again at ${at(reserve.at)} although ${live.attempt ?? "an attempt"} recorded the outcome at ${
          at(live.at)
        } (${live.outcome._tag})`
      }))
    }
  }

  // the first attempt that ended with a value or a failure of the operation's own says what the outcome is
  const firstEnding = new Map<string, { readonly label: string; readonly ending: unknown }>()
  let outcomeLost = false
  for (const { label, outcome } of played) {
    if (outcome._tag === "Killed") continue
    const exit = outcome.exit
    const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
    if (Exit.isFailure(exit) && Option.isNone(failure)) {
      // an interruption is a crash; a defect the simulated downstream was scripted to die with is its exit
      const defects = Array.from(Cause.defects(exit.cause))
      if (!defects.every((defect) => defect instanceof SimulatedDownstream.SimulatedDefect)) {
        violations.push(Violation.UnexpectedFailure({
          attempt: label,
          detail: `died: ${Cause.pretty(exit.cause).split("\n")[0]}`
        }))
      }
    } else if (Option.isSome(failure) && IdempotencyError.isIdempotencyError(failure.value)) {
      const error = failure.value
      if (UNEXPECTED.includes(error._tag)) {
        violations.push(Violation.UnexpectedFailure({ attempt: label, detail: describeError(error) }))
      } else if (error._tag === "IdempotencyConflict" && error.retryAfterMillis === 0) {
        // the engine found a record whose lease had ended and that the store did not take over
        violations.push(Violation.BlockedPastLease({
          attempt: label,
          detail: `the lease had ended, but the store did not let the attempt take the key over (${
            describeError(error)
          })`
        }))
      } else if (label === "probe" && error._tag === "DownstreamTimeout" && error.replayed) {
        outcomeLost = true
      } else if (label === "probe") {
        violations.push(
          error._tag === "IdempotencyConflict"
            ? Violation.BlockedPastLease({
              attempt: label,
              detail: `still ${describeError(error)} at ${at(probeAt)}, after every lease had ended`
            })
            : Violation.UnexpectedFailure({
              attempt: label,
              detail: `failed with a healthy downstream and store: ${describeError(error)}`
            })
        )
      }
    } else {
      const succeeded = Exit.isSuccess(exit)
      const ending = succeeded ? exit.value.value : Option.getOrUndefined(failure)
      const result = seen.reserves.filter((reserve) => reserve.attempt === label).pop()?.result
      const recorded = result?._tag === "Existing"
        ? result.record.status === "COMPLETED" ? result.record : undefined
        : seen.completions.find((completion) => result !== undefined && completion.token === result.token)
      const kind = recorded?.outcome?._tag
      if (kind === undefined ? succeeded && exit.value.replayed : (kind === "Success") !== succeeded) {
        violations.push(Violation.OutcomeMismatch({
          attempt: label,
          detail: `${succeeded ? "returned" : "failed with"} ${format.short(ending)}${
            succeeded && exit.value.replayed ? " as a replay" : ""
          }, but the recorded outcome is ${kind === undefined ? "none" : `a ${kind}`}`
        }))
      } else if (recorded !== undefined && (kind === "Success" || kind === "Failure")) {
        const first = firstEnding.get(recorded.token)
        if (first === undefined) {
          firstEnding.set(recorded.token, { label, ending })
        } else if (!isDeepStrictEqual(first.ending, ending)) {
          violations.push(Violation.OutcomeMismatch({
            attempt: label,
            detail: `ended with ${format.short(ending)}, but ${first.label} ended with ${
              format.short(first.ending)
            } for the same recorded outcome; they differ ${format.difference(first.ending, ending)}`
          }))
        }
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

const HEALTHY: AttemptPlan = { downstream: [], faults: [] }

const describeProperty = (options: {
  readonly operation: { readonly name: string }
  readonly platform: PlatformModel.Platform
  readonly deduplicate: boolean | ReadonlyArray<string>
}): string =>
  `${options.operation.name} on ${PlatformModel.describe(options.platform)}; the downstream ${
    options.deduplicate === true
      ? "deduplicates by the forwarded key"
      : options.deduplicate === false || options.deduplicate.length === 0
      ? "does not deduplicate"
      : `deduplicates by the forwarded key on ${options.deduplicate.join(", ")}`
  }`

/**
 * Plays one case under the `TestClock` of the context and reports what it found. Never fails.
 *
 * @since 0.1.0
 * @category checking
 */
export const play = <P, A, E, R, ROut = never, RS = never>(
  options: Options<P, A, E, R, ROut, RS>
): (scenario: Scenario) => Effect.Effect<CaseReport, never, Requirements<R, ROut, RS>> => {
  const { operation, platform } = options
  const requirement = options.require ?? "atMostOnce"
  const timeLimitMs = PlatformModel.timeLimitMillis(platform)
  const marginMs = options.deadlineMargin === undefined ? undefined : format.toMillis(options.deadlineMargin)
  // the property's own store models one process: it runs wherever the property does (a CI with NODE_ENV=production)
  const store = options.store ?? IdempotencyStore.makeMemory({ warn: false, allowInProduction: true })
  const description = describeProperty(options)

  return (scenario) => {
    const caseTrace = trace.makeTrace()
    return Effect.gen(function*() {
      if (options.store !== undefined) {
        yield* TestClock.setTime(yield* TestServices.provideLive(Clock.currentTimeMillis))
      }
      const start = yield* Clock.currentTimeMillis
      const seen: Seen = { seq: 0, reserves: [], completions: [], leaseEnd: start }
      const base = yield* store
      const tracked = trackInFlight(base)
      const downstream = yield* SimulatedDownstream.make({ deduplicate: options.deduplicate })
      const simulated = Context.make(SimulatedDownstream.SimulatedDownstream, downstream)
      const services = options.services === undefined
        ? Context.empty() as Context.Context<ROut>
        : yield* Layer.build(options.services).pipe(Effect.provide(simulated))
      const context = Context.merge(
        Context.add(
          simulated,
          IdempotencyStore.IdempotencyStore,
          FaultyStore.make(spyStore(tracked.store, start, seen))
        ),
        services
      )
      const key = `retry-property-${crypto.randomUUID()}`
      const settle = options.store === undefined ? undefined : tracked.settle

      const invoke = (attempt: PlatformModel.AttemptContext<AttemptPlan>) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          operation.runDetailed({
            key,
            payload: options.payload,
            ...(options.scope === undefined ? {} : { scope: options.scope }),
            ...(marginMs === undefined
              ? {}
              : { timeout: Duration.millis(Math.max(0, attempt.deadline - now - marginMs)) })
          })).pipe(
            SimulatedDownstream.scripted(attempt.value.downstream),
            FaultyStore.withFaults(attempt.value.faults, { onInterrupt: "kill" }),
            Effect.provide(context)
          )
      const describe = (outcome: PlatformModel.AttemptOutcome<Idempotency.Result<A>, unknown>) =>
        outcome._tag === "Killed"
          ? `stopped by the platform at its time limit (${format.millis(timeLimitMs)})`
          : describeExit(outcome.exit)
      const attempts = yield* PlatformModel.play(scenario, invoke, { describe, ...(settle && { settle }) })
      const played: Array<Played> = attempts.map((attempt) => ({ label: `attempt ${attempt.id}`, ...attempt }))

      // the probe (README.md#what-one-case-plays): the platform's retry windows may run past the last attempt
      const lastEnd = attempts.reduce((max, attempt) => Math.max(max, attempt.endedAt), start)
      const now = yield* Clock.currentTimeMillis
      const current = yield* Effect.either(base.get(IdempotencyRecord.makeRecordId({
        operation: operation.name,
        key: IdempotencyKey.unsafeMake(key),
        scope: options.scope
      })))
      const inProgress = current._tag === "Left" ||
        Option.exists(current.right, (record) => record.status === "IN_PROGRESS")
      const probeStart = inProgress ? Math.max(lastEnd, seen.leaseEnd) : lastEnd
      // the clock stays where it is when that changes nothing: the record reads the same at both times
      const unchanged = current._tag === "Right" && Option.isSome(current.right) &&
        (!inProgress || seen.leaseEnd <= now)
      if (!unchanged && probeStart !== now) yield* TestClock.setTime(probeStart)
      const probeAt = yield* Clock.currentTimeMillis
      yield* trace.record(
        "probe",
        `probe: a client tries again${
          probeStart > lastEnd ? ` once the lease has ended (${format.offset(probeStart - start)})` : ""
        }`
      ).pipe(Effect.locally(trace.currentAttempt, "probe"))
      const probe = yield* runProbe(
        invoke({
          id: 0,
          delivery: 0,
          source: "resend",
          try: 1,
          value: HEALTHY,
          startedAt: probeAt,
          deadline: probeAt + timeLimitMs
        }),
        timeLimitMs,
        settle,
        describe
      )
      played.push({ label: "probe", outcome: probe.outcome })

      // writes still on their way land before the writes are counted
      const landing = (yield* downstream.calls).reduce(
        (last, call) =>
          call.effect === "pending" && call.behaviour._tag === "WriteLandsLate"
            ? Math.max(last, call.at + call.behaviour.applyAfterMs)
            : last,
        0
      )
      if (landing > (yield* Clock.currentTimeMillis)) {
        yield* settle === undefined
          ? TestClock.setTime(landing)
          : moveStepwise(landing, settle)
      }

      const calls = yield* downstream.calls
      const writes = yield* downstream.writes
      const { outcomeLost, violations } = findViolations({ played, seen, writes, requirement, start, probeAt })
      const deduplicated = calls.filter((call) => call.effect === "deduplicated").length
      const guarantee: Guarantee = SimulatedDownstream.duplicates(writes).length > 0
        ? "atLeastOnce"
        : outcomeLost
        ? "atMostOnce"
        : deduplicated > 0
        ? "exactlyOnceWithDeduplication"
        : "exactlyOnce"
      const timeline = renderTimeline(caseTrace, start)
      const text = [
        `Retry property of ${description}`,
        violations.length === 0
          ? "No violation."
          : ["Violations:", ...violations.map((violation) => `  - ${describeViolation(violation)}`)].join("\n"),
        `This case gives: ${GUARANTEES[guarantee]}.`,
        "Scenario:",
        describeScenario(scenario),
        "Timeline:",
        timeline
      ].join("\n")
      return { scenario, violations, guarantee, writes: writes.length, deduplicated, outcomeLost, timeline, text }
    }).pipe(
      Effect.scoped,
      Effect.locally(trace.currentTrace, caseTrace),
      Logger.withMinimumLogLevel(LogLevel.None)
    )
  }
}

/**
 * Plays one case and fails with `RetryPropertyFailure` (its violations, scenario and timeline) when
 * it found a violation.
 *
 * @since 0.1.0
 * @category checking
 */
export const check = <P, A, E, R, ROut = never, RS = never>(
  options: Options<P, A, E, R, ROut, RS>
): (scenario: Scenario) => Effect.Effect<void, RetryPropertyFailure, Requirements<R, ROut, RS>> => {
  const playCase = play(options)
  return (scenario) =>
    Effect.flatMap(playCase(scenario), (report) =>
      report.violations.length === 0
        ? Effect.void
        : Effect.fail(failure(options.operation.name, report.violations, report.guarantee, report.text)))
}

const failure = (operation: string, violations: ReadonlyArray<Violation>, guarantee: Guarantee, text: string) =>
  new RetryPropertyFailure({ operation, violations: violations.map(describeViolation), guarantee, text })

/**
 * The result of `run`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Report {
  readonly passed: boolean
  /** The weakest guarantee over every case played, shrinking included. */
  readonly guarantee: Guarantee
  /** Shrinking excluded. */
  readonly numRuns: number
  /** Shrinking included: a request written twice, a deduplicated call, or a lost outcome. */
  readonly casesWithDuplicates: number
  readonly casesDeduplicated: number
  readonly casesWithOutcomeLost: number
  /** `{ seed, path }` replays it. */
  readonly counterexample: CaseReport | undefined
  readonly seed: number
  readonly path: string | undefined
  readonly text: string
}

/**
 * Runs the property with `FastCheck.check`, each case on a fresh `TestClock`. Never fails: the
 * report says whether it held, and the guarantee given.
 *
 * @since 0.1.0
 * @category running
 */
export const run = <P, A, E, R, ROut = never, RS = never>(
  options: Options<P, A, E, R, ROut, RS>,
  parameters?: FastCheck.Parameters<[Scenario]>
): Effect.Effect<Report, never, Requirements<R, ROut, RS>> =>
  Effect.gen(function*() {
    const runtime = yield* Effect.runtime<Requirements<R, ROut, RS>>()
    const playCase = play(options)
    const totals = { guarantee: "exactlyOnce" as Guarantee, duplicates: 0, deduplicated: 0, lost: 0 }
    // fast-check shrinks toward the last case that failed: its report is the counterexample's
    let failed = undefined as CaseReport | undefined
    const property = FastCheck.asyncProperty(arbitrary(options), (scenario) =>
      Runtime.runPromise(runtime)(Effect.provide(playCase(scenario), TestContext.TestContext)).then((report) => {
        totals.guarantee = weakest(totals.guarantee, report.guarantee)
        totals.duplicates += report.guarantee === "atLeastOnce" ? 1 : 0
        totals.deduplicated += report.deduplicated > 0 ? 1 : 0
        totals.lost += report.outcomeLost ? 1 : 0
        if (report.violations.length > 0) {
          failed = report
        }
        return report.violations.length === 0
      }))
    const details = yield* Effect.promise(() =>
      FastCheck.check(property, parameters)
    )
    const { counterexamplePath: path, numRuns, numShrinks, seed } = details
    const text = details.failed
      ? `Counterexample after ${numRuns} case(s), shrunk ${numShrinks} time(s) (replay with seed ${seed}, path "${path}").\n${
        failed?.text ?? `fast-check failed: ${String(details.errorInstance)}`
      }`
      : `Retry property of ${
        describeProperty(options)
      }: ${numRuns} cases passed (seed ${seed}); the configuration gives ${GUARANTEES[totals.guarantee]}.`
    return {
      passed: !details.failed,
      guarantee: totals.guarantee,
      numRuns,
      casesWithDuplicates: totals.duplicates,
      casesDeduplicated: totals.deduplicated,
      casesWithOutcomeLost: totals.lost,
      counterexample: details.failed ? failed : undefined,
      seed,
      path: path ?? undefined,
      text
    }
  })

/**
 * Runs the property (see `run`) and fails with `RetryPropertyFailure` when it does not hold.
 *
 * @since 0.1.0
 * @category running
 */
export const assert = <P, A, E, R, ROut = never, RS = never>(
  options: Options<P, A, E, R, ROut, RS>,
  parameters?: FastCheck.Parameters<[Scenario]>
): Effect.Effect<Report, RetryPropertyFailure, Requirements<R, ROut, RS>> =>
  Effect.flatMap(run(options, parameters), (report) =>
    report.passed
      ? Effect.succeed(report)
      : Effect.fail(
        failure(options.operation.name, report.counterexample?.violations ?? [], report.guarantee, report.text)
      ))
