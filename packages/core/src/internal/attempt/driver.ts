/**
 * The driver of one attempt's machine (`machine.ts`), in plain Effect: it runs each command and
 * feeds what happened back, with the clock read after it. It is the only part of the attempt that
 * waits, forks or is interrupted, and it runs on one fiber, the caller's, the only one that moves the
 * state.
 *
 * The reservation runs on the caller's fiber, interruptible by the caller (a replay starts no
 * fiber). From the downstream's start, what takes time runs in a fiber of its own (the downstream,
 * a lease extension, an effectful encoder, a write) and posts its end to the driver's inbox; the
 * machine's wake-up is a sleeping fiber that posts too, started only when the driver finds nothing
 * to do after a yield (a downstream and a write that finish at once cost no timer). A step the
 * machine gave up on (an encoder or a write past its bound) is interrupted and not waited for.
 * Whether the downstream stops is learned from its end: the driver interrupts it and waits for it.
 *
 * The caller's interruption is an event: the attempt goes on, uninterruptibly and bounded by the
 * machine, until what it started is settled; then the interruption takes effect.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import type * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as FiberRef from "effect/FiberRef"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Attempt from "../../Attempt.js"
import * as IdempotencyContext from "../../IdempotencyContext.js"
import type { IdempotencyConflict, LeaseLost, StoreFailure } from "../../IdempotencyError.js"
import { isIdempotencyError, isLeaseLost, StoreError, StoreUnavailable } from "../../IdempotencyError.js"
import type { FailurePolicy } from "../../IdempotencyPolicy.js"
import type { RecordId } from "../../IdempotencyRecord.js"
import { StoredOutcome } from "../../IdempotencyRecord.js"
import type { IdempotencyStore } from "../../IdempotencyStore.js"
import type * as Outcome from "../outcome.js"
import type { Fixed } from "./fixed.js"
import * as Machine from "./machine.js"
import type * as Recording from "./recording.js"
import { methodOf, NOT_IN_TIME } from "./recording.js"

/** What an operation gives each of its attempts: its codec, its policies, its downstream. */
export interface Operation<P, A, E, R> {
  readonly codec: Outcome.Codec<A, E>
  readonly failurePolicy: (error: E) => FailurePolicy
  readonly completeRetry: Schedule.Schedule<unknown>
  readonly waitSchedule: Schedule.Schedule<unknown, IdempotencyConflict> | undefined
  readonly ttl: Duration.Duration
  readonly execute: (payload: P) => Effect.Effect<A, E, R>
}

/** One attempt's fixed data: the machine's, and what the commands need. */
export interface Run<P, A, E, R> {
  readonly fixed: Fixed
  readonly operation: Operation<P, A, E, R>
  readonly payload: P
  readonly store: IdempotencyStore["Type"]
  readonly clock: Clock.Clock
  readonly id: RecordId
  readonly token: string
  readonly lease: Duration.Duration
  /** Told every step of the machine, when a test listens (`currentTrace`). */
  readonly trace: Trace | undefined
}

/** A listener of every step of an attempt's machine: the event, with the clock, and where it led. */
export type Trace = (
  event: Machine.Event,
  now: number,
  next: Machine.State,
  commands: ReadonlyArray<Machine.Command>
) => void

/**
 * The listener of the steps of the attempts run on a fiber, for the tests that hold the driver to
 * the machine.
 *
 * @internal
 */
export const currentTrace = FiberRef.unsafeMake<Trace | undefined>(undefined)

/** A store call that dies is a `StoreError` of its method: a failure with a policy, never a dead fiber. */
const typed = <X, Y>(method: string, call: Effect.Effect<X, Y>): Effect.Effect<X, Y | StoreError> =>
  Effect.catchAllDefect(call, (defect) =>
    Effect.zipRight(
      Effect.logError(`idempotency: the store's ${method} died`, defect),
      Effect.fail(new StoreError({ method, cause: defect }))
    ))

/** A call bounded by `until` on `clock`: past it, it is interrupted and fails as unavailable. */
const bounded = <X, Y>(
  clock: Clock.Clock,
  method: string,
  until: number,
  call: Effect.Effect<X, Y>
): Effect.Effect<X, Y | StoreUnavailable> => {
  if (until === Infinity) return call
  const left = until - clock.unsafeCurrentTimeMillis()
  const late = () => new StoreUnavailable({ method, cause: NOT_IN_TIME })
  return left <= 0
    ? Effect.fail(late())
    : Effect.timeoutFail(Effect.interruptible(call), { duration: Duration.millis(left), onTimeout: late })
}

/** How a downstream's exit reads to the machine. */
const endedOf = <A, E>(exit: Exit.Exit<A, E>): Recording.Ended => {
  if (Exit.isSuccess(exit)) return { _tag: "Succeeded", value: exit.value }
  const cause = exit.cause
  if (Cause.isInterruptedOnly(cause)) return { _tag: "Interrupted", cause }
  const failure = Cause.failureOption(cause)
  return Option.isSome(failure) ? { _tag: "Failed", error: failure.value, cause } : { _tag: "Died", cause }
}

/** The cause of a failed reservation, typed: what is not a failure of the store's is a `StoreError`. */
const storeCause = (cause: Cause.Cause<unknown>): Cause.Cause<unknown> => {
  const failure = Cause.failureOption(cause)
  return Option.isSome(failure) && isIdempotencyError(failure.value)
    ? cause
    : Cause.fail(new StoreError({ method: "reserve", cause: Cause.squash(cause) }))
}

const TICK: Machine.Event = { _tag: "Tick" }
const CALLER_INTERRUPTED: Machine.Event = { _tag: "CallerInterrupted" }
const GIVEN_BACK: Machine.Event = { _tag: "GivenBack" }
const WRITTEN: Machine.Event = { _tag: "Written" }
const NOT_ENCODED = StoredOutcome.Omitted({ reason: "its encoding failed" })

/**
 * Runs the attempt to its answer. It never fails: a failure of the attempt is in the answer; only the
 * caller's interruption ends it as an interruption, once everything the attempt started is settled.
 */
export const drive = <P, A, E, R>(run: Run<P, A, E, R>): Effect.Effect<Machine.Answer, never, R> =>
  Effect.uninterruptibleMask((restore) => {
    const { clock, fixed, id, operation, store, token } = run
    const now = () => clock.unsafeCurrentTimeMillis()

    /** The caller's interruption, once it came. */
    let interruption: Cause.Cause<never> | undefined
    /** What happened and is not yet stepped, in order: what a command gave at once, what fibers posted. */
    const inbox: Array<Machine.Event> = []
    /** Rung by a post while the driver waits. */
    let bell: Deferred.Deferred<void> | undefined
    let downstream: Fiber.RuntimeFiber<void> | undefined
    let extension: Fiber.RuntimeFiber<void> | undefined
    let pending: Fiber.RuntimeFiber<void> | undefined
    let alarm: Fiber.RuntimeFiber<void> | undefined
    let alarmAt = Infinity
    let waiter: Schedule.ScheduleDriver<unknown, IdempotencyConflict> | undefined

    const post = (event: Machine.Event) => {
      inbox.push(event)
      if (bell !== undefined) {
        const rung = bell
        bell = undefined
        Deferred.unsafeDone(rung, Effect.void)
      }
    }

    /** Whether the caller was interrupted: `restore` fails at once on an interrupted fiber. */
    const probe = (then: Machine.Event) =>
      Effect.matchCause(restore(Effect.void), {
        onFailure: (cause) => {
          interruption = cause
          inbox.push(CALLER_INTERRUPTED)
        },
        onSuccess: () => {
          inbox.push(then)
        }
      })

    /**
     * Runs `effect` in a fiber of its own, interruptible, and posts its end as an event; `toEvent`
     * gives none for an end nobody waits for (the interruption of a step given up on).
     */
    const spawn = <X, Y, Z>(
      effect: Effect.Effect<X, Y, Z>,
      toEvent: (exit: Exit.Exit<X, Y>) => Machine.Event | undefined
    ): Effect.Effect<Fiber.RuntimeFiber<void>, never, Z> =>
      Effect.forkDaemon(Effect.flatMap(Effect.exit(Effect.interruptible(effect)), (exit) =>
        Effect.sync(() => {
          const event = toEvent(exit)
          if (event !== undefined) post(event)
        })))

    const interrupt = (fiber: Fiber.RuntimeFiber<void> | undefined) =>
      fiber === undefined ? undefined : Fiber.interruptAsFork(fiber, fiber.id())

    /** The attempt's write of the record, `complete` retried while the store is unavailable. */
    const write = (w: Recording.Write): Effect.Effect<void, LeaseLost | StoreFailure> =>
      w._tag === "Complete"
        ? complete(w.outcome)
        : w._tag === "MarkFailed"
        ? typed("markFailed", store.markFailed({ id, token, ttl: operation.ttl }))
        : typed("release", store.release({ id, token }))

    const complete = (outcome: StoredOutcome): Effect.Effect<void, LeaseLost | StoreFailure> => {
      const request = { id, token, outcome, ttl: operation.ttl }
      // a retried completion whose first try was applied but whose answer was lost sees its own
      // COMPLETED record: that is this attempt's outcome, recorded, not a lost lease
      const ownRecord = (error: LeaseLost) =>
        Effect.flatMap(
          typed("get", store.get(id)),
          (record) =>
            Option.isSome(record) && record.value.status === "COMPLETED" && record.value.token === token
              ? Effect.void
              : Effect.fail(error)
        )
      const once = typed("complete", store.complete(request))
      return Effect.catchAll(once, (error) => {
        if (isLeaseLost(error)) return ownRecord(error)
        if (error._tag !== "StoreUnavailable") return Effect.fail(error)
        return Effect.catchIf(
          Effect.retry(once, { schedule: operation.completeRetry, while: (e) => e._tag === "StoreUnavailable" }),
          isLeaseLost,
          ownRecord
        )
      })
    }

    const reserve = (): Effect.Effect<void> => {
      const sentAt = now()
      const call = store.reserve({
        id,
        token,
        fingerprint: fixed.fingerprint,
        lease: run.lease,
        ttl: operation.ttl,
        takeover: fixed.onTimeout !== "markUnknown"
      })
      return Effect.matchCauseEffect(restore(bounded(clock, "reserve", fixed.until, call)), {
        onFailure: (cause) =>
          // an interruption is the caller's, or the store's own call's
          probe({ _tag: "ReserveFailed", cause: storeCause(cause) }),
        onSuccess: (result) => {
          if (result._tag === "Reserved") {
            // a caller interrupted just after the reservation answered gives it back
            return probe({ _tag: "Reserved", attempt: result.attempt, sentAt })
          }
          inbox.push({
            _tag: "Found",
            found: Attempt.found({
              operation: fixed.operation,
              key: fixed.key,
              fingerprint: fixed.fingerprint,
              record: result.record,
              now: result.now,
              onTimeout: fixed.onTimeout,
              timeoutMillis: fixed.timeoutMs
            })
          })
          return Effect.void
        }
      })
    }

    const wait = (conflict: IdempotencyConflict, until: number): Effect.Effect<void> => {
      const left = until - now()
      if (left <= 0) return Effect.sync(() => inbox.push({ _tag: "Waited", again: false }))
      const next = Effect.suspend(() =>
        waiter === undefined
          ? Effect.flatMap(Schedule.driver(operation.waitSchedule!), (driver) => {
            waiter = driver
            return driver.next(conflict)
          })
          : waiter.next(conflict)
      )
      // the schedule's wait is cut off at `until`: the answer never waits past it
      return Effect.matchCauseEffect(restore(Effect.timeoutOption(next, Duration.millis(left))), {
        onFailure: () => probe({ _tag: "Waited", again: false }),
        onSuccess: (slept) => Effect.sync(() => inbox.push({ _tag: "Waited", again: Option.isSome(slept) }))
      })
    }

    /** Builds the downstream and starts it in a fiber of its own; a construction that throws ran nothing. */
    const start = (attempt: number): Effect.Effect<void, never, R> | undefined => {
      let effect: Effect.Effect<A, E, R>
      try {
        effect = operation.execute(run.payload)
      } catch (defect) {
        inbox.push({ _tag: "NotStarted", defect })
        return undefined
      }
      if (!Effect.isEffect(effect)) {
        inbox.push({ _tag: "NotStarted", defect: new TypeError("the operation's execute returned no Effect") })
        return undefined
      }
      const withContext = Effect.provideService(
        effect,
        IdempotencyContext.IdempotencyContext,
        IdempotencyContext.make({ id, token, attempt })
      ) as Effect.Effect<A, E, R>
      // interruptible even when the caller runs in an uninterruptible region; its end always posts
      return Effect.map(
        spawn(withContext, (exit): Machine.Event => ({ _tag: "DownstreamEnded", ended: endedOf(exit) })),
        (fiber) => {
          downstream = fiber
        }
      )
    }

    /** Runs one command: an effect to run, or `undefined` when it was done at once. */
    const execute = (command: Machine.Command): Effect.Effect<void, never, R> | undefined => {
      switch (command._tag) {
        case "Reserve":
          return reserve()
        case "Wait":
          return wait(command.conflict, command.until)
        case "GiveBack":
          return Effect.matchCause(
            bounded(clock, "release", command.until, typed("release", store.release({ id, token }))),
            {
              onFailure: () => inbox.push(GIVEN_BACK),
              onSuccess: () => inbox.push(GIVEN_BACK)
            }
          )
        case "Start":
          return start(command.attempt)
        case "Extend": {
          const sentAt = command.sentAt
          return Effect.map(
            spawn(typed("extend", store.extend({ id, token, lease: run.lease })), (exit): Machine.Event | undefined => {
              if (Exit.isSuccess(exit)) return { _tag: "Extended", sentAt }
              const failure = Cause.failureOption(exit.cause)
              if (Option.isNone(failure)) return undefined
              return isLeaseLost(failure.value)
                ? { _tag: "ExtensionRefused", sentAt }
                : { _tag: "ExtensionFailed", sentAt }
            }),
            (fiber) => {
              extension = fiber
            }
          )
        }
        case "AbandonExtension":
          return interrupt(extension)
        case "Interrupt":
          return interrupt(downstream)
        case "Encode": {
          const encoded = operation.codec.success(command.value as A)
          const toEvent = (e: Outcome.EncodedSuccess<A>): Machine.Event =>
            Either.isRight(e)
              ? { _tag: "Encoded", json: e.right.json, value: e.right.value }
              : { _tag: "NotEncoded", reason: e.left }
          // a synchronous schema gives a plain `Either`: read at once, without a fiber
          if (Either.isEither(encoded)) {
            inbox.push(toEvent(Either.getOrThrow(encoded as Either.Either<Outcome.EncodedSuccess<A>>)))
            return undefined
          }
          return Effect.map(
            spawn(encoded, (exit) => Exit.isSuccess(exit) ? toEvent(exit.value) : undefined),
            (fiber) => {
              pending = fiber
            }
          )
        }
        case "EncodeFailure":
          return Effect.map(
            spawn(operation.codec.failure(command.error as E), (exit): Machine.Event | undefined =>
              Exit.isSuccess(exit)
                ? { _tag: "FailureEncoded", outcome: exit.value }
                : Cause.isInterruptedOnly(exit.cause)
                ? undefined
                : { _tag: "FailureEncoded", outcome: NOT_ENCODED }),
            (fiber) => {
              pending = fiber
            }
          )
        case "Choose":
          try {
            inbox.push({ _tag: "Chosen", policy: operation.failurePolicy(command.error as E) })
          } catch (defect) {
            inbox.push({ _tag: "ChoiceThrew", defect })
          }
          return undefined
        case "Write":
          return Effect.map(
            spawn(write(command.write), (exit): Machine.Event | undefined => {
              if (Exit.isSuccess(exit)) return WRITTEN
              const failure = Cause.failureOption(exit.cause)
              if (Option.isSome(failure)) return { _tag: "WriteFailed", error: failure.value }
              return Cause.isInterruptedOnly(exit.cause) ? undefined : {
                _tag: "WriteFailed",
                error: new StoreError({ method: methodOf(command.write), cause: Cause.squash(exit.cause) })
              }
            }),
            (fiber) => {
              pending = fiber
            }
          )
        case "Abandon":
          return interrupt(pending)
        case "Log":
          return command.level === "Error"
            ? Effect.logError(command.message, command.cause)
            : Effect.logWarning(command.message, command.cause)
        case "Answer":
          return undefined
      }
    }

    /** Waits for the next event: one yield first, then with the machine's wake-up set. */
    const next = (state: Machine.State): Effect.Effect<void> =>
      Effect.flatMap(Effect.yieldNow(), () => {
        if (inbox.length > 0) return Effect.void
        const wake = Machine.wakeAt(state)
        const at = now()
        if (wake <= at) {
          inbox.push(TICK)
          return Effect.void
        }
        let arm: Effect.Effect<void> = Effect.void
        if (wake < alarmAt || alarmAt <= at) {
          const stop = interrupt(alarm)
          alarmAt = wake
          if (wake !== Infinity) {
            const sleep = spawn(Effect.sleep(Duration.millis(wake - at)), (exit) =>
              Exit.isSuccess(exit) ? TICK : undefined)
            arm = Effect.map(stop === undefined ? sleep : Effect.zipRight(stop, sleep), (fiber) => {
              alarm = fiber
            })
          } else if (stop !== undefined) {
            arm = stop
          }
        }
        return Effect.zipRight(
          arm,
          Effect.suspend(() => {
            if (inbox.length > 0) {
              return Effect.void
            }
            const rung = Deferred.unsafeMake<void>(FiberId.none)
            bell = rung
            const ring = Deferred.await(rung)
            return interruption === undefined
              ? Effect.catchAllCause(restore(ring), (cause) =>
                Effect.sync(() => {
                  bell = undefined
                  interruption = cause as Cause.Cause<never>
                  inbox.push(CALLER_INTERRUPTED)
                }))
              : ring
          })
        )
      })

    /** Runs `commands` from `i`, then steps the machine on the next event, until it answers. */
    const loop = (
      state: Machine.State,
      commands: ReadonlyArray<Machine.Command>,
      i: number
    ): Effect.Effect<Machine.Answer, never, R> => {
      for (; i < commands.length; i++) {
        const effect = execute(commands[i]!)
        if (effect !== undefined) {
          const from = i + 1
          return Effect.flatMap(effect, () => loop(state, commands, from))
        }
      }
      if (state._tag === "Answered") return Effect.succeed(state.answer)
      const event = inbox.shift()
      if (event === undefined) return Effect.flatMap(next(state), () => loop(state, [], 0))
      if (event._tag === "Tick" && alarmAt <= now()) alarmAt = Infinity
      const at = now()
      const [nextState, nextCommands] = Machine.step(fixed, state, event, at)
      if (run.trace !== undefined) run.trace(event, at, nextState, nextCommands)
      // what the downstream did to its fiber's references reaches the caller, as with plain composition
      return event._tag === "DownstreamEnded"
        ? Effect.flatMap(Fiber.inheritAll(downstream!), () => loop(nextState, nextCommands, 0))
        : loop(nextState, nextCommands, 0)
    }

    const [state, commands] = Machine.start(fixed)
    return Effect.flatMap(loop(state, commands, 0), (answer) => {
      const stops = [interrupt(alarm), interrupt(extension), interrupt(pending)].filter((stop) => stop !== undefined)
      const end = interruption === undefined ? Effect.succeed(answer) : Effect.failCause(interruption)
      return stops.length === 0 ? end : Effect.zipRight(Effect.all(stops, { discard: true }), end)
    })
  })
