import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"

/** @internal */
export type Source = "platform" | "store" | "fault" | "downstream" | "probe"

/** @internal */
export interface TraceEvent {
  readonly seq: number
  readonly at: number
  readonly attempt: string | undefined
  readonly source: Source
  readonly text: string
}

/** @internal */
export interface Trace {
  readonly events: Array<TraceEvent>
}

/** @internal */
export const makeTrace = (): Trace => ({ events: [] })

/**
 * Set by the property, inherited by forks.
 *
 * @internal
 */
export const currentTrace: FiberRef.FiberRef<Trace | undefined> = FiberRef.unsafeMake<Trace | undefined>(undefined)

/** @internal */
export const currentAttempt: FiberRef.FiberRef<string | undefined> = FiberRef.unsafeMake<string | undefined>(undefined)

/** @internal */
export const record = (source: Source, text: string): Effect.Effect<void> =>
  Effect.flatMap(FiberRef.get(currentTrace), (trace) =>
    trace === undefined
      ? Effect.void
      : Effect.flatMap(Clock.currentTimeMillis, (at) =>
        Effect.flatMap(FiberRef.get(currentAttempt), (attempt) =>
          Effect.sync(() => {
            trace.events.push({ seq: trace.events.length, at, attempt, source, text })
          }))))
