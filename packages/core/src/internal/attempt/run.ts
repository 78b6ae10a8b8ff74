/**
 * The run behind every entry point: the request checked before any store is touched, the attempt
 * driven to its answer, a found record replayed, the run counted, traced and reported.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as DefaultServices from "effect/DefaultServices"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as LogLevel from "effect/LogLevel"
import type * as ParseResult from "effect/ParseResult"
import * as Attempt from "../../Attempt.js"
import { inSpan } from "../../base/span.js"
import type { IdempotencyError } from "../../IdempotencyError.js"
import { describeParseError, InvalidPayload, StoredOutcomeInvalid } from "../../IdempotencyError.js"
import * as IdempotencyKey from "../../IdempotencyKey.js"
import type { FailurePolicy } from "../../IdempotencyPolicy.js"
import { makeRecordId } from "../../IdempotencyRecord.js"
import { IdempotencyStore } from "../../IdempotencyStore.js"
import * as Tracing from "../../Tracing.js"
import type { Ended } from "../outcome.js"
import * as Outcome from "../outcome.js"
import * as Telemetry from "../telemetry.js"
import * as Alarms from "./alarms.js"
import type * as Calls from "./calls.js"
import * as Driver from "./driver.js"
import type { Fixed } from "./fixed.js"

/**
 * An operation, resolved: every option decoded and checked once.
 *
 * @internal
 */
export interface Definition<P, A, E, R> extends Outcome.Steps<A, E> {
  readonly name: string
  readonly settings: Attempt.Resolved
  /** Called on the run's stack: it may throw (a payload too deep), or give a plain `Either`. */
  readonly fingerprint: (payload: P) => Effect.Effect<string, ParseResult.ParseError>
  readonly failurePolicy: (error: E) => FailurePolicy
  readonly key: IdempotencyKey.Options | undefined
  readonly execute: (payload: P) => Effect.Effect<A, E, R>
}

/**
 * Where a run reports its `Result`: set by `Idempotency.result`.
 *
 * @internal
 */
export const currentResultSink = FiberRef.unsafeMake<
  ((result: Attempt.Result<unknown>) => Effect.Effect<void>) | undefined
>(undefined)

const outcomeOf = <A>(ended: Ended<A>): Telemetry.Outcome =>
  ended._tag === "Done"
    ? Telemetry.ofResult(ended.result)
    : ended.outcome === "replayed"
    ? "replayed"
    : Telemetry.ofError(ended.error)

/** A step that waits for nothing the attempt holds, bounded by the deadline (when there is one). */
const byDeadline = <X, Y>(
  clock: Clock.Clock,
  deadline: number,
  step: Effect.Effect<X, Y>,
  late: () => Effect.Effect<X, Y>
): Effect.Effect<X, Y> => {
  if (deadline === Infinity || Either.isEither(step)) return step
  const left = deadline - clock.unsafeCurrentTimeMillis()
  return left <= 0
    ? late()
    : Effect.flatten(
      Effect.timeoutTo(step, { duration: Duration.millis(left), onSuccess: Effect.succeed, onTimeout: late })
    )
}

/**
 * @internal
 */
export const make = <P, A, E, R>(def: Definition<P, A, E, R>) => {
  const name = def.name
  const settings = def.settings
  const marginMs = Duration.toMillis(settings.leaseMargin)
  const heartbeatMs = settings.heartbeat === undefined ? undefined : Duration.toMillis(settings.heartbeat)
  const maxHoldMs = settings.maxHold === undefined ? Infinity : Duration.toMillis(settings.maxHold)
  const codec = Outcome.make<A, E>(name, def)
  const operation: Calls.Operation<P, A, E, R> = {
    alarms: Alarms.make(),
    codec,
    failurePolicy: def.failurePolicy,
    completeRetry: settings.completeRetry,
    waitSchedule: settings.inProgress?._tag === "Wait" ? settings.inProgress.schedule : undefined,
    ttl: settings.ttl,
    execute: def.execute
  }
  const report = Telemetry.reporter(name)
  const spanOptions = { attributes: { "idempotency.operation": name }, captureStackTrace: false } as const

  const invalidPayload = (detail: string) => new InvalidPayload({ operation: name, detail })
  // a payload too deep for the canonical form overflows the stack: still the payload's fault
  const notFingerprinted = () => invalidPayload("the payload cannot be fingerprinted")

  const fingerprintOf = (payload: P): Effect.Effect<string, InvalidPayload> => {
    let fingerprint: Effect.Effect<string, ParseResult.ParseError>
    try {
      fingerprint = def.fingerprint(payload)
    } catch {
      return Either.left(notFingerprinted())
    }
    if (Either.isEither(fingerprint)) {
      return Either.mapLeft(
        fingerprint as Either.Either<string, ParseResult.ParseError>,
        (error) => invalidPayload(describeParseError(error))
      )
    }
    return fingerprint.pipe(
      Effect.mapError((error) => invalidPayload(describeParseError(error))),
      Effect.catchAllDefect(() => Effect.fail(notFingerprinted()))
    )
  }

  const attemptOf = (
    request: Attempt.Request<P>,
    fiber: Fiber.RuntimeFiber<unknown, unknown>
  ): Effect.Effect<Ended<A>, E | IdempotencyError, R> => {
    // read once for the whole run, from the fiber that runs it
    const store = Context.unsafeGet(fiber.getFiberRef(FiberRef.currentContext), IdempotencyStore)
    const clock = Context.get(fiber.getFiberRef(DefaultServices.currentServices), Clock.Clock)
    const key = IdempotencyKey.validate(request.key, def.key)
    if (Either.isLeft(key)) return Effect.fail(key.left)
    const start = clock.unsafeCurrentTimeMillis()
    const window = Attempt.window({
      operation: name,
      request,
      timeout: settings.timeout,
      margin: settings.leaseMargin,
      now: start
    })
    if (Either.isLeft(window)) return Effect.fail(window.left)
    const deadline = request.deadline ?? Infinity
    const fingerprint = byDeadline(
      clock,
      deadline,
      fingerprintOf(request.payload),
      () => Effect.fail(invalidPayload("its fingerprint was not computed before the attempt's deadline"))
    )
    const go = (fingerprint: string) =>
      attempt(request, fiber, store, clock, key.right, fingerprint, window.right.timeoutMillis, deadline)
    if (!Either.isEither(fingerprint)) return Effect.flatMap(fingerprint, go)
    const known = fingerprint as Either.Either<string, InvalidPayload>
    return Either.isLeft(known) ? Effect.fail(known.left) : go(known.right)
  }

  const attempt = (
    request: Attempt.Request<P>,
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    store: IdempotencyStore["Type"],
    clock: Clock.Clock,
    key: IdempotencyKey.IdempotencyKey,
    fingerprint: string,
    timeoutMs: number,
    deadline: number
  ): Effect.Effect<Ended<A>, E | IdempotencyError, R> => {
    const id = makeRecordId({ operation: name, key, scope: request.scope })
    const leaseMs = Attempt.leaseMillis(settings, timeoutMs)
    const fixed: Fixed = {
      operation: name,
      key,
      recordId: id.value,
      fingerprint,
      timeoutMs,
      leaseMs,
      marginMs,
      heartbeatMs,
      maxHoldMs,
      onTimeout: settings.onTimeout,
      onDefect: settings.onDefect,
      waits: operation.waitSchedule !== undefined,
      until: deadline - marginMs,
      deadline
    }
    const run: Calls.Run<P, A, E, R> = {
      fixed,
      operation,
      payload: request.payload,
      store,
      clock,
      id,
      token: globalThis.crypto.randomUUID(),
      lease: Duration.millis(leaseMs),
      trace: fiber.getFiberRef(Driver.currentTrace)
    }
    return Effect.flatMap(Driver.drive(run), (answer): Effect.Effect<Ended<A>, E | IdempotencyError> => {
      switch (answer._tag) {
        case "Value":
          return Effect.succeed({
            _tag: "Done",
            result: { value: answer.value as A, replayed: false, attempt: answer.attempt, recorded: answer.recorded }
          })
        case "Fail":
          return Effect.failCause(answer.cause as never)
        case "Interrupted":
          return Effect.interrupt
        case "Found": {
          const found = answer.found
          switch (found._tag) {
            case "KeyReused":
              return Effect.succeed({ _tag: "Refused", error: found.error, outcome: "KeyReused" })
            case "Unknown":
              return Effect.succeed({ _tag: "Refused", error: found.error, outcome: "replayed" })
            case "Conflict":
              return Effect.succeed({ _tag: "Refused", error: found.error, outcome: "IdempotencyConflict" })
            case "Free":
              // the driver reads a record the store should have taken over as a conflict
              return Effect.die(new Error("attempt: a free record reached the answer"))
            case "Replay": {
              const record = found.record
              const replay = byDeadline(
                clock,
                deadline,
                codec.replay(record, key, timeoutMs),
                () =>
                  Effect.succeed<Ended<A>>({
                    _tag: "Refused",
                    error: new StoredOutcomeInvalid({
                      operation: name,
                      key,
                      cause: "its decoding did not finish before the attempt's deadline"
                    }),
                    outcome: "StoredOutcomeInvalid"
                  })
              )
              return LogLevel.lessThanEqual(fiber.getFiberRef(FiberRef.currentMinimumLogLevel), LogLevel.Debug)
                ? Effect.zipRight(
                  Effect.logDebug(`idempotency: ${name} replayed the outcome recorded by attempt ${record.attempt}`),
                  replay
                )
                : replay
            }
          }
        }
      }
    })
  }

  /** A refusal fails here, outside the span, so that the span never wraps it. */
  const end = (
    ended: Ended<A>,
    fiber: Fiber.RuntimeFiber<unknown, unknown>
  ): Effect.Effect<Attempt.Result<A>, E | IdempotencyError> => {
    if (ended._tag === "Refused") return Effect.fail(ended.error as E | IdempotencyError)
    const sink = fiber.getFiberRef(currentResultSink)
    return sink === undefined ? Effect.succeed(ended.result) : Effect.as(sink(ended.result), ended.result)
  }

  const runDetailed = (
    request: Attempt.Request<P>
  ): Effect.Effect<Attempt.Result<A>, E | IdempotencyError, R | IdempotencyStore> =>
    Effect.withFiberRuntime<Attempt.Result<A>, E | IdempotencyError, R>((fiber) => {
      // every run is counted once: where it ended, else (a failure before, a defect) from its cause
      const clock = Context.get(fiber.getFiberRef(DefaultServices.currentServices), Clock.Clock)
      const startedAt = clock.unsafeCurrentTimeMillis()
      let counted = false
      const count = (outcome: Telemetry.Outcome) => {
        counted = true
        report(outcome, clock.unsafeCurrentTimeMillis() - startedAt, fiber.getFiberRef(FiberRef.currentMetricLabels))
      }
      const ended = (result: Ended<A>) => {
        count(outcomeOf(result))
        return end(result, fiber)
      }
      const run = !Tracing.unsafeIsEnabled(fiber)
        ? Effect.flatMap(attemptOf(request, fiber), ended)
        : Effect.flatMap(
          inSpan(
            Effect.suspend(() => attemptOf(request, fiber)),
            name,
            spanOptions,
            (span, exit) => {
              span.attribute(
                "idempotency.outcome",
                Exit.isSuccess(exit) ? outcomeOf(exit.value) : Telemetry.ofCause(exit.cause)
              )
              if (typeof request.key === "string") {
                span.attribute("idempotency.key_hash", IdempotencyKey.hash(request.key))
              }
            }
          ),
          ended
        )
      return Effect.tapErrorCause(run, (cause) => {
        if (!counted) count(Telemetry.ofCause(cause))
        return Effect.void
      })
    })

  return { runDetailed, fingerprintOf }
}
