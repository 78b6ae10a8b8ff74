/**
 * The protocol engine behind every entry point of `Idempotency`: one attempt of an operation.
 *
 * An attempt validates the key, fingerprints the payload, reserves the record, then either replays
 * the recorded outcome, refuses, or executes. The reservation is the state machine of
 * `reservation.ts`, run here by a loop on the caller's fiber (the only part of it that reads the
 * clock, waits or writes). An execution is the state machine of `execution.ts`, run here by a driver
 * of two fibers:
 *
 * - the worker runs the downstream, then records its outcome (or applies the failure or defect
 *   policy). It starts at once, on the caller's stack, and tells the machine when the downstream ends;
 * - the watchdog runs the machine's commands (sleep, extend the lease, inspect or interrupt the
 *   worker) and feeds their answers back. It is the only part that sleeps.
 *
 * A worker that completes without waiting costs one fiber and nothing else. On the live clock a
 * plain timer stands in for the watchdog until its first wake-up, and the watchdog starts only if
 * the worker still runs then. After an interruption, an exit that became known is recorded like any
 * other; only an outcome that is really unknown gets the timeout policy. An interrupted caller is no
 * crash: the run's interruption takes effect once the outcome is recorded (or its policy applied).
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as DefaultServices from "effect/DefaultServices"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as FiberId from "effect/FiberId"
import * as FiberRef from "effect/FiberRef"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as Runtime from "effect/Runtime"
import * as RuntimeFlags from "effect/RuntimeFlags"
import * as Schedule from "effect/Schedule"
import type { Request, Result } from "../Idempotency.js"
import * as IdempotencyContext from "../IdempotencyContext.js"
import type { IdempotencyConflict, IdempotencyError, StoreFailure } from "../IdempotencyError.js"
import {
  CleanupFailed,
  describeParseError,
  DownstreamTimeout,
  InvalidPayload,
  isLeaseLost,
  isStoreFailure,
  LeaseLost,
  OutcomeNotReplayable,
  StoreUnavailable
} from "../IdempotencyError.js"
import * as IdempotencyKey from "../IdempotencyKey.js"
import type { FailurePolicy, InProgressPolicy, TimeoutPolicy } from "../IdempotencyPolicy.js"
import type { RecordId } from "../IdempotencyRecord.js"
import { makeRecordId, StoredOutcome } from "../IdempotencyRecord.js"
import { IdempotencyStore } from "../IdempotencyStore.js"
import * as Tracing from "../Tracing.js"
import * as Execution from "./execution.js"
import type { Ended } from "./outcome.js"
import * as Outcome from "./outcome.js"
import { andThen } from "./outcome.js"
import * as Reservation from "./reservation.js"
import { inSpan } from "./span.js"
import * as Telemetry from "./telemetry.js"

/**
 * An operation, resolved: every option decoded once.
 *
 * @internal
 */
export interface Definition<P, A, E, R> {
  readonly name: string
  /**
   * The payload's fingerprint. It is called on the run's stack and may throw (a payload too deep
   * for the canonical form). Like the schema steps below, it may give a plain `Either` (what a
   * synchronous schema gives): the engine then reads it at once, without a step of the runtime.
   */
  readonly fingerprint: (payload: P) => Effect.Effect<string, ParseResult.ParseError>
  readonly encodeSuccess: (value: A) => Effect.Effect<unknown, ParseResult.ParseError>
  readonly decodeSuccess: (input: unknown) => Effect.Effect<A, ParseResult.ParseError>
  readonly encodeFailure: ((error: E) => Effect.Effect<unknown, ParseResult.ParseError>) | undefined
  readonly decodeFailure: ((input: unknown) => Effect.Effect<unknown, ParseResult.ParseError>) | undefined
  readonly failurePolicy: (error: E) => FailurePolicy
  readonly ttl: Duration.Duration
  readonly timeout: Duration.Duration
  /** The configured lease, if any. */
  readonly lease: Duration.Duration | undefined
  readonly leaseMargin: Duration.Duration
  readonly heartbeat: Duration.Duration | undefined
  readonly onTimeout: TimeoutPolicy
  readonly onDefect: TimeoutPolicy
  readonly inProgress: InProgressPolicy | undefined
  readonly key: IdempotencyKey.Options | undefined
  readonly completeRetry: Schedule.Schedule<unknown>
  readonly execute: (payload: P) => Effect.Effect<A, E, R>
}

/**
 * Where a run reports its `Result`, when someone listens: `Idempotency.result` sets it for the
 * effect it wraps.
 *
 * @internal
 */
export const currentResultSink = FiberRef.unsafeMake<((result: Result<unknown>) => Effect.Effect<void>) | undefined>(
  undefined
)

/** The outcome of a run that ended as `ended`. */
const outcomeOf = <A>(ended: Ended<A>): Telemetry.Outcome =>
  ended._tag === "Done"
    ? Telemetry.ofResult(ended.result)
    : ended.outcome === "replayed"
    ? "replayed"
    : Telemetry.ofError(ended.error)

/** A store call bounded by a point in time; past it the call is interrupted and fails as unavailable. */
type Guard = <X, Y>(method: string, effect: Effect.Effect<X, Y>) => Effect.Effect<X, Y | StoreUnavailable>

const unbounded: Guard = (_, effect) => effect

/** The clock of every fiber that was not given another one: the only one a plain timer can stand in for. */
const liveClock = Context.get(DefaultServices.liveServices, Clock.Clock)

/** The longest delay `setTimeout` keeps (about 24.8 days); a longer wait wakes early and looks again. */
const MAX_TIMER_MILLIS = 2_147_483_647

/** The cause of a store call cut off by the attempt's deadline. */
const DEADLINE_PASSED = "no answer before the attempt's deadline"

const deadlinePassed = (method: string) => new StoreUnavailable({ method, cause: DEADLINE_PASSED })

/** Whether a store call was cut off by the attempt's deadline (it may still have been applied). */
const isCutOff = (error: StoreFailure | StoreUnavailable): boolean =>
  error._tag === "StoreUnavailable" && error.cause === DEADLINE_PASSED

/** The store method a policy writes with. */
const methodOf = (policy: CleanupFailed["policy"]): string =>
  policy === "release" || policy === "markFailed" ? policy : "complete"

const boundedBy = (until: number): Guard => (method, effect) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    now >= until
      ? Effect.fail(deadlinePassed(method))
      : Effect.timeoutFail(Effect.interruptible(effect), {
        duration: Duration.millis(until - now),
        onTimeout: () => deadlinePassed(method)
      }))

const millis = (duration: Duration.Duration): number => Duration.toMillis(duration)

/**
 * Builds the attempt runner of an operation.
 *
 * @internal
 */
export const make = <P, A, E, R>(def: Definition<P, A, E, R>) => {
  const name = def.name
  const ttl = def.ttl
  const defaultTimeoutMs = millis(def.timeout)
  const marginMs = millis(def.leaseMargin)
  const heartbeatMs = def.heartbeat === undefined ? undefined : Math.max(1, millis(def.heartbeat))
  const configuredLeaseMs = def.lease === undefined ? undefined : millis(def.lease)
  const takeover = def.onTimeout !== "markUnknown"
  const outcomes = Outcome.make<A, E>(name, def)

  const leaseFor = (timeoutMs: number): number => {
    const floor = timeoutMs + marginMs
    if (configuredLeaseMs === undefined) return floor
    return heartbeatMs === undefined ? Math.max(configuredLeaseMs, floor) : configuredLeaseMs
  }

  // built once per operation: a run only looks them up
  const report = Telemetry.reporter(name)
  const spanOptions = { attributes: { "idempotency.operation": name }, captureStackTrace: false } as const

  const invalidPayload = (detail: string) => new InvalidPayload({ operation: name, detail })

  // a payload too deep for the canonical form overflows the stack: still the payload's fault
  const notFingerprinted = () => invalidPayload("the payload cannot be fingerprinted")

  /** The payload's fingerprint: a plain `Either` when the payload's schema is synchronous. */
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

  /**
   * One run, to its end: a success, a refusal that is data (see `Ended`), or a failure of the
   * execution in the error channel.
   */
  const attemptOf = (
    request: Request<P>,
    fiber: Fiber.RuntimeFiber<unknown, unknown>
  ): Effect.Effect<Ended<A>, E | IdempotencyError, R> => {
    // read once for the whole run, from the fiber that runs it
    const store = Context.unsafeGet(fiber.getFiberRef(FiberRef.currentContext), IdempotencyStore)
    const clock = Context.get(fiber.getFiberRef(DefaultServices.currentServices), Clock.Clock)
    const key = IdempotencyKey.validate(request.key, def.key)
    if (Either.isLeft(key)) return Effect.fail(key.left)
    const fingerprint = fingerprintOf(request.payload)
    if (!Either.isEither(fingerprint)) {
      return Effect.flatMap(
        fingerprint,
        (fingerprint) => reserveAndRun(request, store, clock, fiber, key.right, fingerprint)
      )
    }
    const known = fingerprint as Either.Either<string, InvalidPayload>
    return Either.isLeft(known)
      ? Effect.fail(known.left)
      : reserveAndRun(request, store, clock, fiber, key.right, known.right)
  }

  /** The run of a valid request: reserve, then replay, refuse or execute. */
  const reserveAndRun = (
    request: Request<P>,
    store: IdempotencyStore["Type"],
    clock: Clock.Clock,
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    key: IdempotencyKey.IdempotencyKey,
    fingerprint: string
  ): Effect.Effect<Ended<A>, E | IdempotencyError, R> => {
    // a replay's debug line is built only when it would be logged
    const logsDebug = LogLevel.lessThanEqual(fiber.getFiberRef(FiberRef.currentMinimumLogLevel), LogLevel.Debug)
    const id = makeRecordId({ operation: name, key, scope: request.scope })
    const start = clock.unsafeCurrentTimeMillis()
    let timeoutMs = request.timeout === undefined
      ? defaultTimeoutMs
      : Math.min(defaultTimeoutMs, millis(Duration.decode(request.timeout)))
    // the downstream must end a margin before the attempt's deadline, to record its outcome
    const downstreamDeadline = request.deadline === undefined ? Infinity : request.deadline - marginMs
    if (request.deadline !== undefined) timeoutMs = Math.min(timeoutMs, downstreamDeadline - start)
    const leaseMs = leaseFor(timeoutMs)
    const lease = Duration.millis(leaseMs)
    const token = globalThis.crypto.randomUUID()
    const schedule = def.inProgress?._tag === "Wait" ? def.inProgress.schedule : undefined
    const config: Reservation.Config = {
      operation: name,
      key,
      fingerprint,
      timeoutMs,
      onTimeout: def.onTimeout,
      waits: schedule !== undefined,
      until: downstreamDeadline,
      deadline: request.deadline ?? Infinity
    }

    // the driver of the reservation's machine: it runs each command and feeds the answer back
    let state: Reservation.State
    let waiter: Schedule.ScheduleDriver<unknown, IdempotencyConflict> | undefined
    // with a deadline, each reservation is bounded by the point after which the downstream would
    // get no time at all
    const reserveGuard = request.deadline === undefined ? unbounded : boundedBy(downstreamDeadline)
    const reserve = Effect.suspend(() => {
      const sentAt = clock.unsafeCurrentTimeMillis()
      return Effect.matchCauseEffect(
        reserveGuard("reserve", store.reserve({ id, token, fingerprint, lease, ttl, takeover })),
        {
          onFailure: (cause) => {
            // a defect or an interruption alone is no answer of the store's: it ends the run as it is
            const failure = Cause.failureOption(cause)
            if (Option.isNone(failure)) return Effect.failCause(cause)
            const cutOff = request.deadline !== undefined && isCutOff(failure.value)
            return drive(Reservation.step(config, state, { _tag: "StoreFailed", cause, cutOff }))
          },
          onSuccess: (result) =>
            drive(
              Reservation.step(config, state, {
                _tag: "StoreAnswered",
                result,
                sentAt,
                now: clock.unsafeCurrentTimeMillis()
              })
            )
        }
      )
    })
    const waited = (again: boolean) => drive(Reservation.step(config, state, { _tag: "Waited", again }))
    const wait = (conflict: IdempotencyConflict, until: number): Effect.Effect<Reservation.Answer, StoreFailure> => {
      const left = until - clock.unsafeCurrentTimeMillis()
      if (left <= 0) return waited(false)
      // the schedule's wait is cut off at `until`: the answer never waits past it
      return Effect.matchEffect(Effect.timeoutOption(waiter!.next(conflict), Duration.millis(left)), {
        onFailure: () => waited(false),
        onSuccess: (slept) => waited(Option.isSome(slept))
      })
    }
    const drive = ([next, command]: Reservation.Step): Effect.Effect<Reservation.Answer, StoreFailure> => {
      state = next
      switch (command._tag) {
        case "Answer":
          return Effect.succeed(command.answer)
        case "Reserve":
          return reserve
        case "Wait":
          return waiter === undefined
            ? Effect.flatMap(Schedule.driver(schedule!), (driver) => {
              waiter = driver
              return wait(command.conflict, command.until)
            })
            : wait(command.conflict, command.until)
        case "GiveBack":
          return Effect.flatMap(
            Effect.ignore(boundedBy(command.until)("release", store.release({ id, token }))),
            () => drive(Reservation.step(config, state, { _tag: "GivenBack" }))
          )
      }
    }

    return Effect.flatMap(
      drive(Reservation.start(config)),
      (answer): Effect.Effect<Ended<A>, E | IdempotencyError, R> => {
        switch (answer._tag) {
          case "Fail":
            return Effect.failCause(answer.cause)
          case "Refused":
            return Effect.succeed(answer)
          case "Replay": {
            const record = answer.record
            return logsDebug
              ? Effect.zipRight(
                Effect.logDebug(`idempotency: ${name} replayed the outcome recorded by attempt ${record.attempt}`),
                outcomes.replay(record, id.key, timeoutMs)
              )
              : outcomes.replay(record, id.key, timeoutMs)
          }
          case "Execute":
            return Effect.map(
              execute(request, store, clock, fiber.id(), id, token, answer, timeoutMs, leaseMs),
              (result): Ended<A> => ({ _tag: "Done", result })
            )
        }
      }
    )
  }

  /** Ends a run outside its span: a refusal fails here, so that it is never wrapped by the span. */
  const end = (
    ended: Ended<A>,
    fiber: Fiber.RuntimeFiber<unknown, unknown>
  ): Effect.Effect<Result<A>, E | IdempotencyError> => {
    if (ended._tag === "Refused") return Effect.fail(ended.error as E | IdempotencyError)
    const sink = fiber.getFiberRef(currentResultSink)
    return sink === undefined ? Effect.succeed(ended.result) : Effect.as(sink(ended.result), ended.result)
  }

  const runDetailed = (request: Request<P>): Effect.Effect<Result<A>, E | IdempotencyError, R | IdempotencyStore> =>
    Effect.withFiberRuntime<Result<A>, E | IdempotencyError, R>((fiber) => {
      // every run is counted once, with its duration: where it ended with a result or a refusal,
      // else (a failure before, an interruption, a defect) from its cause
      const clock = Context.get(fiber.getFiberRef(DefaultServices.currentServices), Clock.Clock)
      const startedAt = clock.unsafeCurrentTimeMillis()
      let counted = false
      const count = (outcome: Telemetry.Outcome) => {
        counted = true
        report(
          outcome,
          clock.unsafeCurrentTimeMillis() - startedAt,
          fiber.getFiberRef(FiberRef.currentMetricLabels)
        )
      }
      const ended = (result: Ended<A>) => {
        count(outcomeOf(result))
        return end(result, fiber)
      }
      const run = !Tracing.unsafeIsEnabled(fiber)
        ? Effect.flatMap(attemptOf(request, fiber), ended)
        // one span per run, with its outcome and the key's hash: only when a tracer is installed
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

  const execute = (
    request: Request<P>,
    store: IdempotencyStore["Type"],
    clock: Clock.Clock,
    runFiber: FiberId.FiberId,
    id: RecordId,
    token: string,
    reservation: Extract<Reservation.Answer, { readonly _tag: "Execute" }>,
    timeoutMs: number,
    leaseMs: number
  ): Effect.Effect<Result<A>, E | IdempotencyError, R> => {
    const attempt = reservation.attempt
    const lease = Duration.millis(leaseMs)
    const times: Execution.Times = {
      leaseMs,
      heartbeatMs,
      marginMs,
      startedAt: clock.unsafeCurrentTimeMillis(),
      downstreamDeadline: Math.min(
        reservation.sentAt + timeoutMs,
        request.deadline === undefined ? Infinity : request.deadline - marginMs
      ),
      attemptDeadline: request.deadline ?? Infinity
    }
    // the execution's state: moved only by `Execution.step`, from the worker, the watchdog and the caller
    let machine = Execution.initial(times, reservation.sentAt + leaseMs)
    const dispatch = (event: Execution.Event): Execution.Command => {
      const [next, command] = Execution.step(times, machine, event)
      machine = next
      return command
    }
    /** The downstream's exit, once it ended. */
    let exit: Exit.Exit<A, E> | undefined
    const recordEnd = () => Execution.recordEnd(times, machine)

    const cleanupFailed = (policy: CleanupFailed["policy"], original: unknown) => (cause: StoreFailure) =>
      new CleanupFailed({ operation: name, key: id.key, policy, original, cause })
    // a lost lease during cleanup means another attempt owns the record now: nothing left to clean
    const ignoreLeaseLost = <X, Y>(effect: Effect.Effect<X, LeaseLost | Y>) =>
      Effect.catchIf(effect, (error): error is LeaseLost => isLeaseLost(error), () => Effect.void)

    /** Applies a policy's write, bounded; a store failure becomes `CleanupFailed`. */
    const apply = (
      guard: Guard,
      policy: CleanupFailed["policy"],
      original: unknown,
      write: Effect.Effect<void, LeaseLost | StoreFailure>
    ): Effect.Effect<void, CleanupFailed> =>
      policy === "keepLease"
        ? Effect.void
        : guard(methodOf(policy), write).pipe(ignoreLeaseLost, Effect.mapError(cleanupFailed(policy, original)))

    /** The write of a policy for an outcome that is unknown (a timeout, a defect). */
    const unknownOutcome = (policy: TimeoutPolicy): Effect.Effect<void, LeaseLost | StoreFailure> =>
      policy === "release"
        ? store.release({ id, token })
        : policy === "markUnknown"
        ? store.complete({ id, token, outcome: StoredOutcome.Timeout(), ttl })
        : Effect.void

    /** Completes with `outcome`, retrying unavailability; a retry that finds its own record counts. */
    const complete = (outcome: StoredOutcome): Effect.Effect<void, LeaseLost | StoreFailure> => {
      const request = { id, token, outcome, ttl }
      // a retried completion whose first try was applied but whose answer was lost sees its own
      // COMPLETED record: that is this attempt's outcome, recorded, not a lost lease
      const ownRecord = (error: LeaseLost) =>
        Effect.flatMap(
          store.get(id),
          (record) =>
            Option.isSome(record) && record.value.status === "COMPLETED" && record.value.token === token
              ? Effect.void
              : Effect.fail(error)
        )
      return Effect.catchAll(store.complete(request), (error) => {
        if (error._tag === "LeaseLost") return ownRecord(error)
        if (error._tag !== "StoreUnavailable") return Effect.fail(error)
        // the retry's schedule is only built when a completion fails
        return Effect.catchIf(
          Effect.retry(store.complete(request), {
            schedule: def.completeRetry,
            while: (error) => error._tag === "StoreUnavailable"
          }),
          (error): error is LeaseLost => error._tag === "LeaseLost",
          ownRecord
        )
      })
    }

    const recordSuccess = (value: A, guard: Guard): Effect.Effect<Result<A>, IdempotencyError> =>
      andThen(
        // with synchronous schemas all at once, without a step of the runtime
        outcomes.success(value),
        (encoded): Effect.Effect<Result<A>, IdempotencyError> => {
          if (encoded._tag === "Left") {
            // the downstream ran: its outcome is kept as omitted, so no retry runs it again
            const reason = encoded.left
            const notReplayable = new OutcomeNotReplayable({ operation: name, key: id.key, reason, replayed: false })
            // recorded: the caller and every retry get `OutcomeNotReplayable`; not recorded (the store
            // failed): the caller learns that a retry may run the downstream again
            return guard("complete", complete(StoredOutcome.Omitted({ reason }))).pipe(
              Effect.mapError((error) =>
                isStoreFailure(error)
                  ? new CleanupFailed({
                    operation: name,
                    key: id.key,
                    policy: "store",
                    original: notReplayable,
                    cause: error
                  })
                  : error
              ),
              Effect.zipRight(Effect.fail(notReplayable))
            )
          }
          const result = (recorded: boolean): Result<A> => ({
            value: encoded.right.value,
            replayed: false,
            attempt,
            recorded
          })
          return Effect.matchEffect(guard("complete", complete(StoredOutcome.Success({ value: encoded.right.json }))), {
            onFailure: (error) =>
              isStoreFailure(error)
                ? Effect.as(
                  Effect.logError("idempotency: the outcome could not be recorded; returning it unrecorded", error),
                  result(false)
                )
                : Effect.fail(error),
            onSuccess: () => Effect.succeed(result(true))
          })
        }
      )

    const recordFailure = (error: E, cause: Cause.Cause<E>, guard: Guard): Effect.Effect<never, E | CleanupFailed> => {
      let chosen: FailurePolicy
      try {
        chosen = def.failurePolicy(error)
      } catch (thrown) {
        // a policy callback that throws is a defect: the defect policy applies, as for any defect
        return apply(guard, def.onDefect, thrown, unknownOutcome(def.onDefect)).pipe(
          Effect.zipRight(Effect.die(thrown))
        )
      }
      return Effect.gen(function*() {
        const policy = chosen
        const outcome = policy === "store" ? yield* outcomes.failure(error) : undefined
        const write: Effect.Effect<void, LeaseLost | StoreFailure> = outcome !== undefined
          ? complete(outcome)
          : policy === "markFailed"
          ? store.markFailed({ id, token, ttl })
          : store.release({ id, token })
        yield* apply(guard, policy, error, write)
        return yield* Effect.failCause(cause)
      })
    }

    /** Records (or applies the policy of) an exit of the downstream that is known. */
    const settle = (exit: Exit.Exit<A, E>, guard: Guard): Effect.Effect<Result<A>, E | IdempotencyError> => {
      if (Exit.isSuccess(exit)) {
        return recordSuccess(exit.value, guard)
      }
      const cause = exit.cause
      if (Cause.isInterruptedOnly(cause)) {
        // the downstream interrupted itself, like a crash: the lease bounds the block
        return Effect.failCause(cause)
      }
      const failure = Cause.failureOption(cause)
      if (Option.isSome(failure)) {
        return recordFailure(failure.value, cause, guard)
      }
      // a defect may come after the downstream's write: its outcome is unknown
      return apply(guard, def.onDefect, Cause.squash(cause), unknownOutcome(def.onDefect)).pipe(
        Effect.zipRight(Effect.failCause(cause))
      )
    }

    // giving back a reservation that nothing used is bounded by the attempt's deadline only
    const giveBack = () =>
      (request.deadline === undefined ? unbounded : boundedBy(request.deadline))(
        "release",
        store.release({ id, token })
      ).pipe(Effect.ignore)

    // building the downstream may throw: nothing has run then, so the reservation is given back
    let downstream: Effect.Effect<A, E, R>
    try {
      downstream = def.execute(request.payload)
    } catch (thrown) {
      return Effect.zipRight(giveBack(), Effect.die(thrown))
    }
    if (clock.unsafeCurrentTimeMillis() >= times.downstreamDeadline) {
      // the reservation took the downstream's time: nothing ran, so it is given back
      return Effect.zipRight(
        giveBack(),
        Effect.fail(
          new DownstreamTimeout({
            operation: name,
            key: id.key,
            timeoutMillis: 0,
            policy: "release",
            replayed: false
          })
        )
      )
    }

    // the downstream's exit is kept the moment it ends (uninterruptibly, so that an interruption
    // cannot come between its end and the note of it); its recording is interruptible again
    const worker = Effect.interruptible(
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(Effect.exit(restore(downstream)), (ended) => {
          exit = ended
          if (dispatch({ _tag: "DownstreamEnded", now: clock.unsafeCurrentTimeMillis() })._tag === "Restart") {
            restartWatchdog?.()
          }
          return restore(settle(ended, unbounded))
        })
      )
    )
    // set once the watchdog can be started: a worker that ends before has no watchdog to wake
    let restartWatchdog: (() => void) | undefined
    // `watchdogFiber` is started only when the worker is still running once its first run ends,
    // and on the live clock only once something is due (`timer` waits until then)
    let watchdogFiber: Fiber.RuntimeFiber<void> | undefined
    let timer: ReturnType<typeof setTimeout> | undefined
    const stopTimer = () => {
      if (timer !== undefined) {
        clearTimeout(timer)
        timer = undefined
      }
    }
    return Effect.uninterruptibleMask((restore) =>
      Effect.withFiberRuntime<Result<A>, E | IdempotencyError, R>((fiber, status) => {
        // the worker's runtime is the run's, with the `IdempotencyContext` of this execution in its
        // context (cheaper than providing it around the downstream, which costs a scope per call)
        const runtime = Runtime.make({
          context: Context.add(
            fiber.getFiberRef(FiberRef.currentContext) as Context.Context<R>,
            IdempotencyContext.IdempotencyContext,
            IdempotencyContext.make({ id, token, attempt })
          ),
          runtimeFlags: status.runtimeFlags,
          fiberRefs: fiber.getFiberRefs()
        })
        // started at once, on this call's stack: a downstream that completes without waiting (and
        // whose outcome is recorded without waiting) is done when `runFork` returns, and then no
        // timer, no watchdog and no scheduling is needed; the worker is a fiber of its own only
        // so that the watchdog can interrupt the downstream without interrupting the run
        const workerFiber = Runtime.runFork(runtime)(worker)
        const done = workerFiber.unsafePoll()
        if (done !== null) return done
        // the worker waits: the watchdog bounds it. Not a child of the run (like a daemon):
        // interrupting the run from outside must leave it to keep the lease until the downstream
        // has stopped. Interruptible even when the run was started in an uninterruptible region
        // (an `HttpApp` runs its handler so): it is interrupted when the worker is done
        const startWatchdog = () => {
          watchdogFiber = Runtime.runFork(runtime)(
            Effect.interruptible(watchdog(store, id, token, lease, workerFiber, dispatch))
          )
        }
        restartWatchdog = () => {
          stopWatchdog()
          startWatchdog()
        }
        if (clock === liveClock) {
          // on the live clock a plain timer waits until the watchdog's first wake-up, and the
          // watchdog starts only if the worker is still running then: a worker that ends first (a
          // recording that answers, a downstream within its time) costs no fiber and no watchdog
          const wake = Execution.firstWake(times, machine)
          timer = setTimeout(
            () => {
              timer = undefined
              if (workerFiber.unsafePoll() === null) startWatchdog()
            },
            Math.min(MAX_TIMER_MILLIS, Math.max(0, wake - clock.unsafeCurrentTimeMillis()))
          )
        } else {
          startWatchdog()
        }
        // waits for the worker's exit with an observer of its own, where `Fiber.await` sends the
        // worker a message (a turn of the scheduler) and adds an interruption handler of its own
        const awaitWorker = Effect.async<Exit.Exit<Result<A>, E | IdempotencyError>>((resume) => {
          workerFiber.addObserver((exit) => resume(Effect.succeed(exit)))
        })
        // the end is handled in this uninterruptible region, so that nothing comes between the
        // worker's exit and the cleanup: no watchdog or timer outlives the run
        return restore(awaitWorker).pipe(
          Effect.onInterrupt(() => callerInterrupted(workerFiber)),
          Effect.flatMap(ended),
          Effect.ensuring(Effect.sync(stopWatchdog))
        )
      })
    )

    /** Stops the timer and the watchdog, without waiting for the watchdog. */
    function stopWatchdog() {
      stopTimer()
      watchdogFiber?.unsafeInterruptAsFork(runFiber)
    }

    /** Stops the timer and the watchdog, once the watchdog has stopped. */
    function awaitWatchdogStop(): Effect.Effect<void> {
      stopTimer()
      return watchdogFiber === undefined ? Effect.void : Effect.asVoid(Fiber.interrupt(watchdogFiber))
    }

    /** The end of the worker: its exit, or what the downstream did when the watchdog interrupted it. */
    function ended(
      workerExit: Exit.Exit<Result<A>, E | IdempotencyError>
    ): Effect.Effect<Result<A>, E | IdempotencyError> {
      if (Exit.isSuccess(workerExit) || !Cause.isInterruptedOnly(workerExit.cause) || !machine.interrupted) {
        return workerExit
      }
      return Effect.zipRight(Effect.suspend(awaitWatchdogStop), Effect.suspend(afterInterruption))
    }

    /**
     * The caller was interrupted (a timeout around the call, a race, a client gone): the attempt is
     * not a crash. The machine decides (`CallerInterrupted`); the run's interruption takes effect
     * once the worker has ended and its outcome is recorded or its policy applied.
     */
    function callerInterrupted(
      workerFiber: Fiber.RuntimeFiber<Result<A>, E | IdempotencyError>
    ): Effect.Effect<void> {
      return Effect.suspend(() => {
        if (dispatch({ _tag: "CallerInterrupted" })._tag === "Restart") restartWatchdog?.()
        return Fiber.await(workerFiber)
      }).pipe(
        Effect.flatMap((workerExit) => ended(workerExit)),
        Effect.ignore
      )
    }

    /** The end of an execution whose worker the watchdog interrupted. */
    function afterInterruption(): Effect.Effect<Result<A>, E | IdempotencyError> {
      if (exit !== undefined && !(Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause))) {
        // its exit became known while it was being interrupted (or it was recording): record it
        return settle(exit, boundedBy(recordEnd()))
      }
      // the downstream was stopped before it ended: its outcome is unknown
      const guard = boundedBy(recordEnd())
      switch (machine.reason) {
        case "leaseLost":
          return Effect.fail(new LeaseLost({ method: "extend", recordId: id.value }))
        case "leaseExpiring":
          return apply(guard, def.onTimeout, "lease expiring", unknownOutcome(def.onTimeout)).pipe(
            Effect.catchAll((error) =>
              Effect.logWarning("idempotency: the timeout policy could not be applied", error)
            ),
            Effect.zipRight(Effect.fail(new LeaseLost({ method: "extend", recordId: id.value, reason: "expiring" })))
          )
        default: {
          const original = new DownstreamTimeout({
            operation: name,
            key: id.key,
            timeoutMillis: timeoutMs,
            policy: def.onTimeout,
            replayed: false
          })
          return Effect.zipRight(
            apply(guard, def.onTimeout, original, unknownOutcome(def.onTimeout)),
            Effect.fail(original)
          )
        }
      }
    }
  }

  /**
   * The watchdog of one execution: the driver of `Execution.step`, and the only part of it that
   * sleeps. It never fails: a failed extension is retried while the lease lasts, and a lost lease
   * stops the downstream.
   */
  const watchdog = (
    store: IdempotencyStore["Type"],
    id: RecordId,
    token: string,
    lease: Duration.Duration,
    worker: Fiber.RuntimeFiber<unknown, unknown>,
    dispatch: (event: Execution.Event) => Execution.Command
  ): Effect.Effect<void> =>
    Effect.gen(function*() {
      const self = yield* Effect.fiberId
      // an interruption is sent in the same step as the event that decided it: the worker cannot
      // move (end its downstream, start recording) between the decision and the interruption
      const decide = (event: Execution.Event): Execution.Command => {
        const command = dispatch(event)
        if (command._tag !== "Interrupt") return command
        worker.unsafeInterruptAsFork(self)
        return command.next
      }
      let command: Execution.Command = { _tag: "Look" }
      while (true) {
        switch (command._tag) {
          case "Look": {
            command = decide({ _tag: "Look", now: yield* Clock.currentTimeMillis })
            break
          }
          case "Extend": {
            const extended = yield* boundedBy(command.until)("extend", store.extend({ id, token, lease })).pipe(
              Effect.either
            )
            if (extended._tag === "Right") {
              command = decide({ _tag: "Extended", sentAt: command.sentAt })
            } else if (isLeaseLost(extended.left)) {
              yield* Effect.logWarning("idempotency: the lease was lost; interrupting the downstream", extended.left)
              command = decide({ _tag: "LeaseLost" })
            } else {
              yield* Effect.logWarning("idempotency: the lease could not be extended; retrying", extended.left)
              command = decide({ _tag: "ExtensionFailed", now: yield* Clock.currentTimeMillis })
            }
            break
          }
          case "Inspect": {
            const flags = yield* worker.runtimeFlags
            command = decide({
              _tag: "Inspected",
              interruptible: RuntimeFlags.interruptible(flags),
              now: yield* Clock.currentTimeMillis
            })
            break
          }
          case "Sleep": {
            yield* Effect.sleep(Duration.millis(Math.max(1, command.until - (yield* Clock.currentTimeMillis))))
            command = { _tag: "Look" }
            break
          }
          case "Interrupt":
            // `decide` sends it
            command = command.next
            break
          case "Park":
          case "Restart":
          case "None":
            return yield* Effect.never
        }
      }
    })

  return { runDetailed, fingerprintOf }
}
