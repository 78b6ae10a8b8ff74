import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"

/**
 * The source of a trace event.
 *
 * @internal
 */
export type Source = "platform" | "store" | "fault" | "downstream" | "probe"

/**
 * One event of a simulated case.
 *
 * @internal
 */
export interface TraceEvent {
  readonly seq: number
  readonly at: number
  readonly attempt: string | undefined
  readonly source: Source
  readonly text: string
}

/**
 * The events of one simulated case, in the order they happened.
 *
 * @internal
 */
export interface Trace {
  readonly events: Array<TraceEvent>
}

/** @internal */
export const makeTrace = (): Trace => ({ events: [] })

/**
 * The trace of the case the current fiber belongs to (set by the property, inherited by forks).
 *
 * @internal
 */
export const currentTrace: FiberRef.FiberRef<Trace | undefined> = FiberRef.unsafeMake<Trace | undefined>(undefined)

/**
 * The label of the attempt the current fiber runs ("attempt 2", "probe").
 *
 * @internal
 */
export const currentAttempt: FiberRef.FiberRef<string | undefined> = FiberRef.unsafeMake<string | undefined>(undefined)

/**
 * Appends an event to the current trace, if there is one.
 *
 * @internal
 */
export const record = (source: Source, text: string): Effect.Effect<void> =>
  Effect.flatMap(FiberRef.get(currentTrace), (trace) =>
    trace === undefined
      ? Effect.void
      : Effect.flatMap(Clock.currentTimeMillis, (at) =>
        Effect.flatMap(FiberRef.get(currentAttempt), (attempt) =>
          Effect.sync(() => {
            trace.events.push({ seq: trace.events.length, at, attempt, source, text })
          }))))
