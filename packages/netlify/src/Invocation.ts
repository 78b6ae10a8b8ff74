/**
 * The current invocation: the web `Request`, Netlify's context, and the deadline of the time limit.
 *
 * @since 0.1.0
 */
import { HttpIdempotency, IdempotentFetch } from "@effect-idempotency/http"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { InvalidRequestBody, RequestBodyTooLarge } from "./NetlifyError.js"

/**
 * The largest request body a function accepts unless told otherwise: 1 MiB.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_MAX_BODY_BYTES = HttpIdempotency.DEFAULT_MAX_BODY_BYTES

const decoder = new TextDecoder()

/**
 * The part of Netlify's `Context` the adapter reads.
 *
 * @since 0.1.0
 * @category models
 */
export interface NetlifyContext {
  readonly requestId?: string | undefined
  readonly ip?: string | undefined
  readonly params?: Readonly<Record<string, string>> | undefined
  readonly deploy?: { readonly id?: string | undefined; readonly context?: string | undefined } | undefined
  readonly site?: { readonly id?: string | undefined; readonly name?: string | undefined } | undefined
}

/**
 * The current invocation.
 *
 * @since 0.1.0
 * @category tags
 */
export class Invocation extends Context.Tag("@effect-idempotency/netlify/Invocation")<
  Invocation,
  {
    readonly request: Request
    readonly context: NetlifyContext
    /** Epoch milliseconds, `Clock`, as `deadline`. */
    readonly startedAt: number
    readonly deadline: number
    readonly text: Effect.Effect<string, InvalidRequestBody | RequestBodyTooLarge>
  }
>() {}

/**
 * Builds an invocation: the body is read at most once, on first use.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: {
  readonly request: Request
  readonly context: NetlifyContext
  readonly startedAt: number
  readonly timeLimit: Duration.Duration
  readonly maxBodyBytes?: number | undefined
}): Effect.Effect<Invocation["Type"]> =>
  Effect.map(
    Effect.cached(
      Effect.map(
        IdempotentFetch.readBody(options.request, options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES),
        (bytes) => decoder.decode(bytes)
      )
    ),
    (text) =>
      fromIncoming(
        { request: options.request, context: options.context, startedAt: options.startedAt, text },
        options.timeLimit
      )
  )

/** @internal */
export const fromIncoming = (
  incoming: Pick<IdempotentFetch.Incoming<NetlifyContext>, "request" | "context" | "startedAt" | "text">,
  timeLimit: Duration.Duration
): Invocation["Type"] => ({
  request: incoming.request,
  context: incoming.context ?? {},
  startedAt: incoming.startedAt,
  deadline: incoming.startedAt + Duration.toMillis(timeLimit),
  text: incoming.text
})

/**
 * The web request of the current invocation.
 *
 * @since 0.1.0
 * @category accessors
 */
export const request: Effect.Effect<Request, never, Invocation> = Effect.map(Invocation, (self) => self.request)

/**
 * The request body, read once, at most the function's `maxBodyBytes`.
 *
 * @since 0.1.0
 * @category accessors
 */
export const text: Effect.Effect<string, InvalidRequestBody | RequestBodyTooLarge, Invocation> = Effect.flatMap(
  Invocation,
  (self) => self.text
)

/**
 * The time left before the platform cuts the current invocation off.
 *
 * @since 0.1.0
 * @category accessors
 */
export const remaining: Effect.Effect<Duration.Duration, never, Invocation> = Effect.zipWith(
  Invocation,
  Clock.currentTimeMillis,
  (self, now) => Duration.millis(Math.max(0, self.deadline - now))
)
