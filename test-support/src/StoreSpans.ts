/**
 * A tracer that records the spans started through it, for the stores' tracing tests.
 *
 * @example
 * const { spans, tracer } = yield* StoreSpans.recording
 * yield* store.get(id).pipe(Effect.withSpan("caller"), Effect.withTracer(tracer))
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"

/** A span, and the name of its parent span (`""` for an external one, `undefined` for none). */
export interface Recorded {
  readonly span: Tracer.Span
  readonly parent: string | undefined
}

/** A tracer over the current one that records the spans started through it, and their parents' names. */
export const recording: Effect.Effect<{ readonly tracer: Tracer.Tracer; readonly spans: ReadonlyArray<Recorded> }> =
  Effect.map(Effect.tracer, (base) => {
    const spans: Array<Recorded> = []
    const tracer = Tracer.make({
      span: (name, parent, context, links, startTime, kind, options) => {
        const span = base.span(name, parent, context, links, startTime, kind, options)
        spans.push({ span, parent: Option.getOrUndefined(Option.map(parent, (p) => p._tag === "Span" ? p.name : "")) })
        return span
      },
      context: (f, fiber) => base.context(f, fiber)
    })
    return { tracer, spans }
  })
