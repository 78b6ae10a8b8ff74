/**
 * The driver of one attempt's machine, in plain Effect: it runs each command and feeds what happened
 * back. See CONTRIBUTING.md#the-attempts-machine.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
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
import type { LeaseLost, StoreFailure } from "../../IdempotencyError.js"
import { IdempotencyConflict, isLeaseLost, StoreError } from "../../IdempotencyError.js"
import type { StoredOutcome } from "../../IdempotencyRecord.js"
import type * as Outcome from "../outcome.js"
import type * as Alarms from "./alarms.js"
import type { Run, Trace } from "./calls.js"
import * as Calls from "./calls.js"
import {
  bounded,
  CALLER_INTERRUPTED,
  downstreamEnded,
  encodedEvent,
  GIVEN_BACK,
  NOT_ENCODED,
  storeCause,
  TICK,
  typed,
  WRITTEN
} from "./calls.js"
import * as Machine from "./machine.js"
import { methodOf } from "./recording.js"

/** The listener of the steps of a fiber's attempts, for the tests that hold the driver to the machine. */
export const currentTrace = FiberRef.unsafeMake<Trace | undefined>(undefined)

interface Job {
  readonly effect: Effect.Effect<unknown, unknown>
  readonly toEvent: (exit: Exit.Exit<unknown, unknown>) => Machine.Event | undefined
}

/** Runs the attempt to its answer; it never fails (a failure is in the answer). */
export const drive = <P, A, E, R>(run: Run<P, A, E, R>): Effect.Effect<Machine.Answer, never, R> =>
  Effect.uninterruptibleMask((restore) => new Driver(run, restore).run())

class Driver<P, A, E, R> {
  interruption: Cause.Cause<never> | undefined = undefined
  readonly inbox: Array<Machine.Event> = []
  bell: Deferred.Deferred<void> | undefined = undefined
  worker: Fiber.RuntimeFiber<void> | undefined = undefined
  /** Apart from the worker: one let go at maxHold still runs beside the recording's steps. */
  downstream: Fiber.RuntimeFiber<void> | undefined = undefined
  extension: Fiber.RuntimeFiber<void> | undefined = undefined
  extensionSentAt = -Infinity
  /** `at` is `Infinity` while the wake-up is not set. */
  alarm: Alarms.Alarm | undefined = undefined
  waiter: Schedule.ScheduleDriver<unknown, IdempotencyConflict> | undefined = undefined

  constructor(
    readonly attempt: Run<P, A, E, R>,
    readonly restore: <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>
  ) {}

  run(): Effect.Effect<Machine.Answer, never, R> {
    const [state, commands] = Machine.start(this.attempt.fixed)
    return Effect.flatMap(this.loop(state, commands, 0), (answer) => {
      // what still runs is stopped (without waiting): a fiber whose end was stepped has none left
      let end: Effect.Effect<Machine.Answer> = this.interruption === undefined
        ? Effect.succeed(answer)
        : Effect.failCause(this.interruption)
      if (this.alarm !== undefined) {
        end = Effect.zipRight(this.attempt.operation.alarms.cancel(this.attempt.clock, this.alarm), end)
      }
      for (const fiber of [this.extension, this.worker, this.downstream]) {
        if (fiber !== undefined) end = Effect.zipRight(Fiber.interruptAsFork(fiber, fiber.id()), end)
      }
      return end
    })
  }

  now(): number {
    return this.attempt.clock.unsafeCurrentTimeMillis()
  }

  post(event: Machine.Event): void {
    this.inbox.push(event)
    if (this.bell !== undefined) {
      const rung = this.bell
      this.bell = undefined
      Deferred.unsafeDone(rung, Effect.void)
    }
  }

  /** Whether the caller was interrupted (`restore` fails at once on an interrupted fiber): `then` if not. */
  probe(then: Machine.Event): Effect.Effect<void> {
    return Effect.matchCause(this.restore(Effect.void), {
      onFailure: (cause) => {
        this.interruption = cause
        this.inbox.push(CALLER_INTERRUPTED)
      },
      onSuccess: () => {
        this.inbox.push(then)
      }
    })
  }

  spawn<X, Y, Z>(
    effect: Effect.Effect<X, Y, Z>,
    toEvent: (exit: Exit.Exit<X, Y>) => Machine.Event | undefined
  ): Effect.Effect<Fiber.RuntimeFiber<void>, never, Z> {
    return Effect.forkDaemon(Effect.flatMap(Effect.exit(Effect.interruptible(effect)), (exit) =>
      Effect.sync(() => {
        const event = toEvent(exit)
        if (event !== undefined) this.post(event)
      })))
  }

  work(job: Job): Effect.Effect<void, never, R> {
    return Effect.map(this.spawn(job.effect, job.toEvent), (fiber) => {
      this.worker = fiber
    })
  }

  stopWorker(): Effect.Effect<void> | undefined {
    const worker = this.worker
    if (worker === undefined) return undefined
    this.worker = undefined
    return Fiber.interruptAsFork(worker, worker.id())
  }

  reserve(): Effect.Effect<void> {
    const { clock, fixed, id, operation, store, token } = this.attempt
    const sentAt = this.now()
    const call = store.reserve({
      id,
      token,
      fingerprint: fixed.fingerprint,
      lease: this.attempt.lease,
      ttl: operation.ttl,
      takeover: fixed.onTimeout !== "markUnknown"
    })
    return Effect.matchCauseEffect(this.restore(bounded(clock, "reserve", fixed.until, call)), {
      // an interruption is the caller's, or the store's own call's
      onFailure: (cause) => this.probe({ _tag: "ReserveFailed", cause: storeCause(cause) }),
      onSuccess: (result) => {
        // a caller interrupted just after the reservation answered gives it back
        if (result._tag === "Reserved") return this.probe({ _tag: "Reserved", attempt: result.attempt, sentAt })
        const found = Attempt.found({
          operation: fixed.operation,
          key: fixed.key,
          fingerprint: fixed.fingerprint,
          record: result.record,
          now: result.now,
          onTimeout: fixed.onTimeout,
          timeoutMillis: fixed.timeoutMs
        })
        // a record the store should have taken over (it changed meanwhile): a conflict over now
        this.inbox.push({
          _tag: "Found",
          found: found._tag === "Free"
            ? {
              _tag: "Conflict",
              error: new IdempotencyConflict({ operation: fixed.operation, key: fixed.key, retryAfterMillis: 0 })
            }
            : found
        })
        return Effect.void
      }
    })
  }

  wait(conflict: IdempotencyConflict, until: number): Effect.Effect<void> {
    const left = until - this.now()
    if (left <= 0) return Effect.sync(() => this.inbox.push({ _tag: "Waited", again: false }))
    const next = Effect.suspend(() =>
      this.waiter === undefined
        ? Effect.flatMap(Schedule.driver(this.attempt.operation.waitSchedule!), (driver) => {
          this.waiter = driver
          return driver.next(conflict)
        })
        : this.waiter.next(conflict)
    )
    return Effect.matchCauseEffect(this.restore(Effect.timeoutOption(next, Duration.millis(left))), {
      onFailure: () => this.probe({ _tag: "Waited", again: false }),
      onSuccess: (slept) => Effect.sync(() => this.inbox.push({ _tag: "Waited", again: Option.isSome(slept) }))
    })
  }

  start(attempt: number): Effect.Effect<void, never, R> | undefined {
    const { id, operation, token } = this.attempt
    let effect: Effect.Effect<A, E, R>
    try {
      effect = operation.execute(this.attempt.payload)
    } catch (defect) {
      this.inbox.push({ _tag: "NotStarted", defect })
      return undefined
    }
    if (!Effect.isEffect(effect)) {
      this.inbox.push({ _tag: "NotStarted", defect: new TypeError("the operation's execute returned no Effect") })
      return undefined
    }
    const added = Context.add(IdempotencyContext.IdempotencyContext, IdempotencyContext.make({ id, token, attempt }))
    // set on the worker's context and put back before it ends, so `Fiber.inheritAll` never gives it
    // to the caller (what `Effect.provideService` does, without its acquire and release)
    const run = Effect.flatMap(
      FiberRef.getAndUpdate(FiberRef.currentContext, added),
      (context) =>
        Effect.flatMap(
          Effect.exit(Effect.interruptible(effect as Effect.Effect<unknown, unknown>)),
          (exit) =>
            Effect.zipRight(
              FiberRef.set(FiberRef.currentContext, context),
              Effect.sync(() => this.post(downstreamEnded(exit)))
            )
        )
    )
    // interruptible even when the caller runs in an uninterruptible region; its end always posts
    return Effect.map(Effect.forkDaemon(run), (fiber) => {
      this.downstream = fiber
    })
  }

  /** Runs one command: an effect to run, or `undefined` when it was done at once. */
  execute(command: Machine.Command): Effect.Effect<void, never, R> | undefined {
    const { id, operation, store, token } = this.attempt
    switch (command._tag) {
      case "Reserve":
        return this.reserve()
      case "Wait":
        return this.wait(command.conflict, command.until)
      case "GiveBack":
        // in a fiber of its own: the caller's interruption must not cut it off
        return this.work({
          effect: typed("release", store.release({ id, token })),
          toEvent: (exit) => Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause) ? undefined : GIVEN_BACK
        })
      case "AbandonGiveBack":
        return this.stopWorker()
      case "Start":
        return this.start(command.attempt)
      case "Extend": {
        const sentAt = command.sentAt
        const extend = typed("extend", store.extend({ id, token, lease: this.attempt.lease }))
        return Effect.map(
          this.spawn(extend, (exit): Machine.Event | undefined => {
            if (Exit.isSuccess(exit)) return { _tag: "Extended", sentAt }
            const failure = Cause.failureOption(exit.cause)
            if (Option.isNone(failure)) return undefined
            return isLeaseLost(failure.value)
              ? { _tag: "ExtensionRefused", sentAt }
              : { _tag: "ExtensionFailed", sentAt }
          }),
          (fiber) => {
            this.extension = fiber
            this.extensionSentAt = sentAt
          }
        )
      }
      case "AbandonExtension": {
        const extension = this.extension
        this.extension = undefined
        return extension === undefined ? undefined : Fiber.interruptAsFork(extension, extension.id())
      }
      case "Interrupt":
        return this.downstream === undefined ? undefined : Fiber.interruptAsFork(this.downstream, this.downstream.id())
      case "Encode": {
        const encoded = operation.codec.success(command.value as A)
        // a synchronous schema gives a plain `Either`: read at once, without the worker
        if (Either.isEither(encoded)) {
          this.inbox.push(encodedEvent(Either.getOrThrow(encoded as Either.Either<Outcome.EncodedSuccess<unknown>>)))
          return undefined
        }
        return this.work({
          effect: encoded,
          toEvent: (exit) =>
            Exit.isSuccess(exit) ? encodedEvent(exit.value as Outcome.EncodedSuccess<unknown>) : undefined
        })
      }
      case "EncodeFailure":
        return this.work({
          effect: operation.codec.failure(command.error as E),
          toEvent: (exit) =>
            Exit.isSuccess(exit)
              ? { _tag: "FailureEncoded", outcome: exit.value as StoredOutcome }
              : Cause.isInterruptedOnly(exit.cause)
              ? undefined
              : { _tag: "FailureEncoded", outcome: NOT_ENCODED }
        })
      case "Choose":
        try {
          this.inbox.push({ _tag: "Chosen", policy: operation.failurePolicy(command.error as E) })
        } catch (defect) {
          this.inbox.push({ _tag: "ChoiceThrew", defect })
        }
        return undefined
      case "Write": {
        const method = methodOf(command.write)
        return this.work({
          effect: Calls.write(this.attempt, command.write),
          toEvent: (exit) => {
            if (Exit.isSuccess(exit)) return WRITTEN
            const failure = Cause.failureOption(exit.cause)
            if (Option.isSome(failure)) return { _tag: "WriteFailed", error: failure.value as LeaseLost | StoreFailure }
            return Cause.isInterruptedOnly(exit.cause)
              ? undefined
              : { _tag: "WriteFailed", error: new StoreError({ method, cause: Cause.squash(exit.cause) }) }
          }
        })
      }
      case "Abandon":
        return this.stopWorker()
      case "Log":
        return command.level === "Error"
          ? Effect.logError(command.message, command.cause)
          : Effect.logWarning(command.message, command.cause)
      case "Answer":
        return undefined
    }
  }

  next(state: Machine.State): Effect.Effect<void> {
    return Effect.flatMap(Effect.yieldNow(), () => {
      if (this.inbox.length > 0) return Effect.void
      const wake = Machine.wakeAt(state)
      const at = this.now()
      if (wake <= at) {
        this.inbox.push(TICK)
        return Effect.void
      }
      return Effect.zipRight(this.arm(wake, at), Effect.suspend(() => this.ring()))
    })
  }

  arm(wake: number, at: number): Effect.Effect<void> {
    const alarms = this.attempt.operation.alarms
    let alarm = this.alarm
    if (alarm !== undefined && wake >= alarm.at && alarm.at > at) return Effect.void
    if (alarm === undefined) {
      alarm = { at: wake, ring: () => this.post(TICK) }
      this.alarm = alarm
      return alarms.set(this.attempt.clock, alarm)
    }
    const set = alarm
    return Effect.zipRight(
      alarms.cancel(this.attempt.clock, set),
      Effect.suspend(() => {
        set.at = wake
        return wake === Infinity ? Effect.void : alarms.set(this.attempt.clock, set)
      })
    )
  }

  ring(): Effect.Effect<void> {
    if (this.inbox.length > 0) return Effect.void
    const rung = Deferred.unsafeMake<void>(FiberId.none)
    this.bell = rung
    const ring = Deferred.await(rung)
    return this.interruption !== undefined ?
      ring :
      Effect.catchAllCause(this.restore(ring), (cause) =>
        Effect.sync(() => {
          this.bell = undefined
          this.interruption = cause as Cause.Cause<never>
          this.inbox.push(CALLER_INTERRUPTED)
        }))
  }

  loop(
    state: Machine.State,
    commands: ReadonlyArray<Machine.Command>,
    i: number
  ): Effect.Effect<Machine.Answer, never, R> {
    for (; i < commands.length; i++) {
      const effect = this.execute(commands[i]!)
      if (effect !== undefined) {
        const from = i + 1
        return Effect.flatMap(effect, () => this.loop(state, commands, from))
      }
    }
    if (state._tag === "Answered") return Effect.succeed(state.answer)
    const event = this.inbox.shift()
    if (event === undefined) return Effect.flatMap(this.next(state), () => this.loop(state, [], 0))
    const at = this.now()
    // a fiber whose end this is has nothing left to stop
    switch (event._tag) {
      case "Tick":
        if (this.alarm !== undefined && this.alarm.at <= at) this.alarm.at = Infinity
        break
      case "Extended":
      case "ExtensionFailed":
      case "ExtensionRefused":
        if (event.sentAt === this.extensionSentAt) this.extension = undefined
        break
      case "Encoded":
      case "NotEncoded":
      case "FailureEncoded":
      case "Written":
      case "WriteFailed":
      case "GivenBack":
        this.worker = undefined
        break
    }
    const [nextState, nextCommands] = Machine.step(this.attempt.fixed, state, event, at)
    if (this.attempt.trace !== undefined) this.attempt.trace(event, at, nextState, nextCommands)
    if (event._tag !== "DownstreamEnded") return this.loop(nextState, nextCommands, 0)
    const downstream = this.downstream!
    this.downstream = undefined
    // one let go at maxHold ended after its attempt moved on: what it set stays its own
    if (state._tag !== "Executing") return this.loop(nextState, nextCommands, 0)
    return Effect.flatMap(Fiber.inheritAll(downstream), () => this.loop(nextState, nextCommands, 0))
  }
}
