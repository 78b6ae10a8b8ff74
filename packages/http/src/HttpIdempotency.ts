/**
 * The IETF Idempotency-Key draft (draft-ietf-httpapi-idempotency-key-header) as one engine that
 * every HTTP integration shares: the `@effect/platform` middleware, the Web `fetch` wrapper and the
 * serverless adapters only translate their request and response to and from it.
 *
 * Per request, the engine
 *
 * 1. lets through the methods it does not cover (default `POST` and `PATCH`), untouched;
 * 2. reads the `Idempotency-Key` header (an sf-string, `"…"`, or the bare key) and validates it
 *    before anything else: a missing key is a 400 problem where the key is required, a request
 *    to run untouched otherwise;
 * 3. reads the body, at most `maxBodyBytes` of it (413 past it, never read further);
 * 4. fingerprints the request: its method, path, query (by default), the configured headers and
 *    the SHA-256 of the body's bytes;
 * 5. runs the handler once per scoped key through the core's protocol (`Idempotency.make`): the
 *    record's outcome is the response itself (status, the headers of an allow-list, the body's
 *    bytes), kept when the response policy says so (by default every status below 500);
 * 6. answers with the fresh response, or replays the recorded one with `Idempotent-Replayed: true`,
 *    or answers with a problem (400, 409 with `Retry-After`, 413, 422, 500, 503, 504). A 409's
 *    `Retry-After` is the time left of the other request's lease, at most `retryAfter` (1 second):
 *    the lease says how long the key may stay held, not when the other request will be done.
 *
 * @example
 * ```ts
 * import { HttpIdempotency } from "@effect-idempotency/http"
 *
 * const engine = HttpIdempotency.make({ name: "orders", storedHeaders: ["content-type", "location"] })
 * // engine.handle(exchange, downstream): see IdempotentFetch for a whole integration
 * ```
 *
 * @since 0.1.0
 */
import type { IdempotencyPolicy, IdempotencyStore } from "@effect-idempotency/core"
import { Fingerprint, Idempotency, IdempotencyError, IdempotencyKey } from "@effect-idempotency/core"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { Buffer } from "node:buffer"
import { createHash } from "node:crypto"
import type { RequestBodyTooLarge, RequestFailure } from "./HttpIdempotencyError.js"
import { InsufficientTime, InvalidRequestBody, MissingIdempotencyKey } from "./HttpIdempotencyError.js"
import * as StoredResponse from "./StoredResponse.js"
import * as TimeLimit from "./TimeLimit.js"

/**
 * The request header of the key.
 *
 * @since 0.1.0
 * @category constants
 */
export const HEADER = "Idempotency-Key"

/**
 * The methods covered by default: the two the draft names as not idempotent.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_METHODS: ReadonlyArray<string> = ["POST", "PATCH"]

/**
 * The largest request body read by default: 1 MiB.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024

/**
 * The largest response body kept by default: 1 MiB. A larger response is answered, and recorded as
 * not replayable: retries get 500, never a second execution.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024

/**
 * The response headers kept and replayed by default; the others (cookies, for example) go with the
 * fresh response only.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_STORED_HEADERS: ReadonlyArray<string> = [
  "content-type",
  "content-encoding",
  "content-language",
  "content-location",
  "location"
]

/**
 * The longest `Retry-After` of a 409 by default: 1 second.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_RETRY_AFTER: Duration.Duration = Duration.seconds(1)

/**
 * The operation name (the namespace of the records) when none is given.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_NAME = "http"

/**
 * What the response policy sees of a response.
 *
 * @since 0.1.0
 * @category models
 */
export interface ResponseHead {
  readonly status: number
  /** Lower-case names. */
  readonly headers: Readonly<Record<string, string>>
}

/**
 * The default response policy: every status below 500 is recorded (a success, and a rejection that
 * a retry must see again); a 5xx is not: it releases the record, so a retry runs the handler again.
 *
 * @since 0.1.0
 * @category response policies
 */
export const recordUnlessServerError = (response: ResponseHead): boolean => response.status < 500

/**
 * The options of an idempotent route.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options extends Idempotency.Settings {
  /** The operation's name: the namespace of the records, and the name of the span. Default `"http"`. */
  readonly name?: string | undefined
  /** The methods covered; the others pass untouched. Default `DEFAULT_METHODS` (`POST`, `PATCH`). */
  readonly methods?: ReadonlyArray<string> | undefined
  /** The request header of the key. Default `Idempotency-Key`. */
  readonly header?: string | undefined
  /**
   * Whether a request without a key is rejected with 400. Default `true`; with `false`, it runs
   * untouched (without idempotency).
   */
  readonly required?: boolean | undefined
  /** Key validation (the maximum length, 255 by default). */
  readonly keyOptions?: IdempotencyKey.Options | undefined
  /**
   * Request headers that are part of the fingerprint (a key sent again with another value of one of
   * them gets 422). Default: none.
   */
  readonly fingerprintHeaders?: ReadonlyArray<string> | undefined
  /**
   * Whether the query string is part of the fingerprint: `"include"` (default: `?a=1` and `?a=2`
   * are different requests), or `"ignore"`.
   */
  readonly query?: "include" | "ignore" | undefined
  /** The largest request body read, in bytes; a larger one gets 413. Default 1 MiB. */
  readonly maxBodyBytes?: number | undefined
  /**
   * The largest response body kept, in bytes. A larger response is answered once, and recorded as
   * not replayable: retries get 500 and the handler never runs again for the key. Default 1 MiB.
   */
  readonly maxResponseBytes?: number | undefined
  /** The response headers kept and replayed. Default `DEFAULT_STORED_HEADERS`. */
  readonly storedHeaders?: ReadonlyArray<string> | undefined
  /**
   * Which responses are recorded. One that is not recorded releases the record: it is answered to
   * this request, and a retry runs the handler again. Default `recordUnlessServerError`.
   */
  readonly record?: ((response: ResponseHead) => boolean) | undefined
  /**
   * The failure policy for a failure of the handler (its error channel). Default `release`: a
   * retry runs the handler again. A rejection that retries must see as well is better answered as
   * a response (a 4xx), which is recorded.
   */
  readonly onFailure?: ((error: unknown) => IdempotencyPolicy.FailurePolicy) | undefined
  /**
   * A platform's time limit per request (its cut-off), counted from the request's start. The
   * handler then gets the time left less `margin`, every store call ends before the cut-off, and
   * the lease defaults to the time limit. Default: none (the core's `timeout`, 30 seconds).
   */
  readonly timeLimit?: Duration.DurationInput | undefined
  /**
   * With `timeLimit` (or a per-request `cutOff`): the time kept between the end of the handler and
   * the cut-off, to record the outcome and to answer. Default `TimeLimit.defaultMargin(timeLimit)`;
   * with per-request cut-offs only, set it.
   */
  readonly margin?: Duration.DurationInput | undefined
  /**
   * A URL of the documentation of the route's idempotency: the `type` of the problems for a missing,
   * invalid or reused key and a request in progress, with a `Link` header (`rel="describedby"`), as
   * the draft shows. Default: none (`about:blank`).
   */
  readonly documentation?: string | undefined
  /**
   * The longest `Retry-After` of a 409 (the key's request still in progress): a 409 says the time
   * left of the other request's lease, at most this, in whole seconds rounded up. The lease bounds
   * how long a key can stay held (by an attempt that crashed, or timed out under `keepLease`), not
   * when its request will be done: most end well before it, and a retry that comes back then gets
   * the recorded response. Set it near the handler's usual duration. Default `DEFAULT_RETRY_AFTER`
   * (1 second).
   */
  readonly retryAfter?: Duration.DurationInput | undefined
  /** The level of the line logged per request. Default `"Debug"`; a 5xx is logged as a warning. */
  readonly logLevel?: LogLevel.Literal | undefined
}

/**
 * One request as the engine sees it. Integrations build it from their own request.
 *
 * @since 0.1.0
 * @category models
 */
export interface Exchange<E, R> {
  /** Upper case. */
  readonly method: string
  /** The path, without the query. */
  readonly path: string
  /** The query string, with its `?`, or `""`. */
  readonly query: string
  /** A request header by its lower-case name. */
  readonly header: (name: string) => string | null | undefined
  /**
   * The body's bytes, read at most once, and not past `maxBodyBytes`: past it, `RequestBodyTooLarge`.
   */
  readonly body: Effect.Effect<Uint8Array, RequestBodyTooLarge | InvalidRequestBody>
  /** When the request started (epoch milliseconds of the `Clock`), for `timeLimit`. Default: now. */
  readonly startedAt?: number | undefined
  /**
   * When the platform cuts this request off (epoch milliseconds of the `Clock`), where a platform
   * says so per request (AWS Lambda's remaining time). It takes the place of `startedAt +
   * timeLimit`; the handler ends `margin` before it, every store call before it.
   */
  readonly cutOff?: number | undefined
  /**
   * The key, when it comes from elsewhere than the header (derived from the body or an event).
   * `undefined` from it: no key. Default: the header.
   */
  readonly key?: Effect.Effect<string | undefined, E, R> | undefined
  /** A tenant or principal id: keys of different scopes never share a record. Default: none. */
  readonly scope?: Effect.Effect<string | undefined, E, R> | undefined
  /** Where the key was looked for, for the 400 of a missing key. Default: the header. */
  readonly keySource?: string | undefined
  /**
   * The request's payload as the handler sees it, in its encoded form (what a schema that decoded
   * the body encodes it back to), where an integration decodes the body with a schema: the
   * fingerprint then covers its canonical form (core's `Fingerprint`: members in any order, any
   * whitespace) instead of the body's bytes. `None`, or no `payload`: the body's bytes. A body that
   * cannot be decoded at all fails with `InvalidRequestBody`: 400, and nothing runs.
   */
  readonly payload?: Effect.Effect<Option.Option<unknown>, E | InvalidRequestBody, R> | undefined
}

/**
 * A response of the handler, as the engine needs it: its status, its headers (lower-case names),
 * its body's bytes, and the integration's own response, which is answered as it is when the handler
 * ran. `body` is `undefined` when the body cannot be read whole (a stream past `maxResponseBytes`, a
 * body of another kind): such a response is answered once and recorded as not replayable.
 *
 * @since 0.1.0
 * @category models
 */
export interface Captured<X> {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array | undefined
  readonly original: X
}

/**
 * What the integration answers.
 *
 * - `Bypass`: the method is not covered, or the request has no key and none is required: run the
 *   handler as if there were no middleware.
 * - `Fresh`: the handler ran for this request: answer its own response (`recorded` tells whether a
 *   retry will get it back; `response` is that response as it is recorded: the kept headers, and no
 *   body where it could not be read whole).
 * - `Replayed`: an earlier request's recorded response, with `Idempotent-Replayed: true`.
 * - `Rejected`: a problem response (the key, the body, a conflict, the store, the time).
 *
 * @since 0.1.0
 * @category models
 */
export type Answer<X> =
  | { readonly _tag: "Bypass" }
  | {
    readonly _tag: "Fresh"
    readonly value: X
    readonly recorded: boolean
    readonly response: StoredResponse.StoredResponse
    /** The execution attempt (1, or more after takeovers); 0 where the protocol did not say. */
    readonly attempt: number
  }
  | { readonly _tag: "Replayed"; readonly response: StoredResponse.StoredResponse; readonly attempt: number }
  | { readonly _tag: "Rejected"; readonly response: StoredResponse.StoredResponse; readonly error: RequestFailure }

/**
 * An engine: the options resolved once, and the protocol's operation built once.
 *
 * @since 0.1.0
 * @category models
 */
export interface HttpIdempotency {
  readonly name: string
  /** The largest request body read, in bytes. */
  readonly maxBodyBytes: number
  /** The largest response body kept, in bytes. */
  readonly maxResponseBytes: number
  /** Whether a method is covered (upper case). */
  readonly covers: (method: string) => boolean
  /** The time limit of a request, when one is set (`timeLimit`), in milliseconds. */
  readonly timeLimitMillis: number | undefined
  /** The time kept before a cut-off to record an outcome (`margin`), in milliseconds. */
  readonly marginMillis: number
  /** Handles one request; `downstream` runs at most once, and only for a `Fresh` answer. */
  readonly handle: <X, E, R>(
    exchange: Exchange<E, R>,
    downstream: Effect.Effect<Captured<X>, E, R>
  ) => Effect.Effect<Answer<X>, E, R | IdempotencyStore.IdempotencyStore>
}

/**
 * The fingerprint's input: what makes two requests with one key the same request.
 *
 * @since 0.1.0
 * @category models
 */
export interface RequestFingerprint {
  readonly method: string
  readonly path: string
  readonly query: string
  /** The values of `fingerprintHeaders`, in their order (`""` when absent). */
  readonly headers: ReadonlyArray<string>
  /** The SHA-256 of the body's bytes, base64. */
  readonly body: string
}

const isRequestFingerprint = (u: unknown): u is RequestFingerprint => {
  if (typeof u !== "object" || u === null) return false
  const self = u as Record<string, unknown>
  return typeof self.method === "string" && typeof self.path === "string" && typeof self.query === "string" &&
    typeof self.body === "string" && Array.isArray(self.headers) &&
    self.headers.every((value) => typeof value === "string")
}

/**
 * The schema of a fingerprint's input: the value as it is (it is JSON already), checked, with no
 * transformation to run per request.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RequestFingerprint: Schema.Schema<RequestFingerprint> = Schema.declare(isRequestFingerprint, {
  identifier: "RequestFingerprint"
})

/**
 * The SHA-256 of a body, as the fingerprint holds it.
 *
 * @since 0.1.0
 * @category utils
 */
export const bodyDigest = (body: Uint8Array): string => createHash("sha256").update(body).digest("base64")

/**
 * The fingerprint of a request, as the engine records it (for inspection and tests): over its body's
 * bytes, or over `payload` (the encoded payload, see `Exchange.payload`) where one is given.
 *
 * @since 0.1.0
 * @category utils
 */
export const fingerprint = (request: {
  readonly method: string
  readonly path: string
  readonly query?: string | undefined
  readonly headers?: ReadonlyArray<string> | undefined
  readonly body: Uint8Array
  readonly payload?: unknown
}): Effect.Effect<string> =>
  Effect.orDie(Idempotency.fingerprint(RequestFingerprint, {
    method: request.method,
    path: request.path,
    query: request.query ?? "",
    headers: request.headers ?? [],
    body: "payload" in request ? Fingerprint.fromEncoded(request.payload) : bodyDigest(request.body)
  }))

/** A response the policy chose not to record: carried as a failure, so the record is released. */
class Unrecorded {
  readonly _tag = "Unrecorded"
}

/** The body of a response that could not be read whole: it never encodes, so it is recorded as omitted. */
const NOT_KEPT = new Uint8Array(0)

/** The downstream of the current request, provided per request to the operation built once. */
class Downstream extends Context.Tag("@effect-idempotency/http/HttpIdempotency/Downstream")<
  Downstream,
  Effect.Effect<StoredResponse.StoredResponse, unknown>
>() {}

/** A response as the store keeps it: its body as base64. */
interface EncodedResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

const isHeaders = (u: unknown): u is Readonly<Record<string, string>> => {
  if (typeof u !== "object" || u === null || Array.isArray(u)) return false
  for (const name in u) {
    if (typeof (u as Record<string, unknown>)[name] !== "string") return false
  }
  return true
}

const toBase64 = (bytes: Uint8Array): string =>
  Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64")

const fromBase64 = (text: string): Uint8Array => {
  const buffer = Buffer.from(text, "base64")
  return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength)
}

/**
 * The recorded response, coded by hand (it runs twice per fresh request and once per replay): the
 * body as base64; a body over the limit, or one that could not be read whole, does not encode, so
 * the core records the outcome as omitted.
 */
const storedSchema = (maxBytes: number): Schema.Schema<StoredResponse.StoredResponse, EncodedResponse> =>
  Schema.declare<StoredResponse.StoredResponse, EncodedResponse, readonly []>([], {
    decode: () => (input, _, ast) => {
      const self = input as Partial<Record<keyof EncodedResponse, unknown>> | null
      return typeof self === "object" && self !== null && typeof self.status === "number" &&
          Number.isInteger(self.status) && isHeaders(self.headers) && typeof self.body === "string"
        ? ParseResult.succeed({ status: self.status, headers: self.headers, body: fromBase64(self.body) })
        : ParseResult.fail(new ParseResult.Type(ast, input, "not a recorded response"))
    },
    encode: () => (input, _, ast) => {
      const self = input as StoredResponse.StoredResponse
      return self.body === NOT_KEPT || self.body.byteLength > maxBytes
        ? ParseResult.fail(new ParseResult.Type(ast, input, "the body cannot be kept"))
        : ParseResult.succeed({ status: self.status, headers: self.headers, body: toBase64(self.body) })
    }
  }, { identifier: `a response whose body has at most ${maxBytes} bytes, read whole` })

const bypass: Answer<never> = { _tag: "Bypass" }

/**
 * Builds an engine: the options are resolved and the operation is built here, once; a request only
 * looks them up.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}): HttpIdempotency => {
  const name = options.name ?? DEFAULT_NAME
  const methods = new Set((options.methods ?? DEFAULT_METHODS).map((method) => method.toUpperCase()))
  const headerName = (options.header ?? HEADER).toLowerCase()
  const keySource = `the ${options.header ?? HEADER} header`
  const required = options.required ?? true
  const keyOptions = options.keyOptions
  const fingerprintHeaders = (options.fingerprintHeaders ?? []).map((header) => header.toLowerCase())
  const includeQuery = (options.query ?? "include") === "include"
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
  const maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES
  const stored = new Set((options.storedHeaders ?? DEFAULT_STORED_HEADERS).map((header) => header.toLowerCase()))
  const recordable = options.record ?? recordUnlessServerError
  const documentation = options.documentation
  const logLevel = LogLevel.fromLiteral(options.logLevel ?? "Debug")
  const retryAfterMs = Math.max(0, Duration.toMillis(Duration.decode(options.retryAfter ?? DEFAULT_RETRY_AFTER)))

  // a platform's cut-off: the handler ends `margin` before it, every store call `allowance` before it
  const timeLimit = options.timeLimit === undefined ? undefined : Duration.decode(options.timeLimit)
  const margin = options.margin !== undefined
    ? Duration.decode(options.margin)
    : timeLimit === undefined
    ? undefined
    : TimeLimit.defaultMargin(timeLimit)
  const allowance = margin === undefined ? undefined : TimeLimit.answerAllowance(margin)
  const timeLimitMs = timeLimit === undefined ? undefined : Duration.toMillis(timeLimit)
  const marginMs = margin === undefined ? 0 : Duration.toMillis(margin)
  const allowanceMs = allowance === undefined ? 0 : Duration.toMillis(allowance)
  const lease = options.lease !== undefined || timeLimit === undefined
    ? options.lease
    : options.heartbeat === undefined
    ? timeLimit
    : Duration.times(Duration.decode(options.heartbeat), 3)

  const onFailure = options.onFailure
  const operation = Idempotency.make({
    ...options,
    name,
    payload: RequestFingerprint,
    success: storedSchema(maxResponseBytes),
    execute: () => Effect.flatMap(Downstream, (downstream) => downstream),
    timeout: options.timeout ?? timeLimit,
    leaseMargin: options.leaseMargin ??
      (margin === undefined || allowance === undefined ? undefined : Duration.subtract(margin, allowance)),
    lease,
    onFailure: (error: unknown) =>
      error instanceof Unrecorded ? "release" : onFailure === undefined ? "release" : onFailure(error),
    key: keyOptions
  })

  const select = (headers: Readonly<Record<string, string>>): Record<string, string> => {
    const kept: Record<string, string> = {}
    for (const name in headers) {
      if (stored.has(name)) kept[name] = headers[name]!
    }
    return kept
  }

  const log = (message: string, status: number) =>
    Effect.logWithLevel(status >= 500 ? LogLevel.Warning : logLevel, message).pipe(
      Effect.annotateLogs("status", status)
    )

  const reject = (failure: RequestFailure): Effect.Effect<Answer<never>> => {
    // a conflict says when a retry can usefully come back: the lease left, at most `retryAfter`
    const error = failure._tag === "IdempotencyConflict" && failure.retryAfterMillis > retryAfterMs
      ? new IdempotencyError.IdempotencyConflict({
        operation: failure.operation,
        key: failure.key,
        retryAfterMillis: retryAfterMs
      })
      : failure
    const response = StoredResponse.fromError(error, { documentation })
    const message = error._tag === "DownstreamTimeout" && error.replayed
      ? `replayed the stored outcome "unknown" (an earlier attempt timed out) ${response.status}; ` +
        "the handler did not run"
      : `${error._tag}: ${error.message}`
    return Effect.as(log(message, response.status), { _tag: "Rejected", response, error })
  }

  const execute = <X, E, R>(
    exchange: Exchange<E, R>,
    downstream: Effect.Effect<Captured<X>, E, R>,
    key: IdempotencyKey.IdempotencyKey
  ): Effect.Effect<Answer<X>, E, R | IdempotencyStore.IdempotencyStore> =>
    Effect.gen(function*() {
      let deadline: number | undefined
      if (timeLimitMs !== undefined || exchange.cutOff !== undefined) {
        const now = yield* Clock.currentTimeMillis
        const cutOff = exchange.cutOff ?? (exchange.startedAt ?? now) + timeLimitMs!
        const remaining = Math.max(0, cutOff - now)
        if (remaining <= marginMs) {
          return yield* reject(new InsufficientTime({ remainingMillis: remaining, marginMillis: marginMs }))
        }
        // every store call ends before the cut-off, leaving time to answer
        deadline = cutOff - allowanceMs
      }

      const body = yield* Effect.either(exchange.body)
      if (Either.isLeft(body)) return yield* reject(body.left)
      let bodyFingerprint = bodyDigest(body.right)
      if (exchange.payload !== undefined) {
        const payload = yield* Effect.either(exchange.payload)
        if (Either.isLeft(payload)) {
          const error = payload.left
          return yield* (error instanceof InvalidRequestBody ? reject(error) : Effect.fail(error as E))
        }
        if (Option.isSome(payload.right)) {
          const canonical = Fingerprint.fromEncodedEither(payload.right.value)
          if (Either.isLeft(canonical)) {
            return yield* reject(
              new InvalidRequestBody({ reason: "Schema", detail: IdempotencyError.describeParseError(canonical.left) })
            )
          }
          bodyFingerprint = canonical.right
        }
      }
      const scope = exchange.scope === undefined ? undefined : yield* exchange.scope

      let captured: Captured<X> | undefined
      let kept: StoredResponse.StoredResponse | undefined
      const run = Effect.flatMap(downstream, (response): Effect.Effect<StoredResponse.StoredResponse, Unrecorded> => {
        captured = response
        kept = { status: response.status, headers: select(response.headers), body: response.body ?? NOT_KEPT }
        return recordable(response) ? Effect.succeed(kept) : Effect.fail(new Unrecorded())
      })
      const fresh = (recorded: boolean, message: string, attempt = 0): Effect.Effect<Answer<X>> =>
        Effect.as(log(message, captured!.status), {
          _tag: "Fresh",
          value: captured!.original,
          recorded,
          response: kept!,
          attempt
        })

      return yield* operation.runDetailed({
        key,
        payload: {
          method: exchange.method,
          path: exchange.path,
          query: includeQuery ? exchange.query : "",
          headers: fingerprintHeaders.map((name) => exchange.header(name) ?? ""),
          body: bodyFingerprint
        },
        scope,
        deadline
      }).pipe(
        // the downstream runs in the operation's fiber, a child of this one: its requirements are
        // those of the returned effect
        Effect.provideService(Downstream, run as Effect.Effect<StoredResponse.StoredResponse, unknown>),
        Effect.matchEffect({
          onSuccess: (result): Effect.Effect<Answer<X>> => {
            if (!result.replayed) {
              const status = captured!.status
              return fresh(
                result.recorded,
                result.recorded
                  ? `executed; recorded the response ${status}`
                  : `executed; could NOT record the response ${status}`,
                result.attempt
              )
            }
            const response = StoredResponse.markReplayed(result.value)
            return Effect.as(
              log(`replayed the stored response ${response.status}; the handler did not run`, response.status).pipe(
                Effect.annotateLogs("attempt", result.attempt)
              ),
              { _tag: "Replayed", response, attempt: result.attempt }
            )
          },
          onFailure: (error): Effect.Effect<Answer<X>, E> => {
            if (error instanceof Unrecorded) {
              return fresh(
                false,
                `executed; the response ${captured!.status} is not recorded: a retry runs the handler again`
              )
            }
            if (IdempotencyError.isIdempotencyError(error)) {
              if (error._tag === "OutcomeNotReplayable" && !error.replayed && captured !== undefined) {
                // the handler ran and its response cannot be kept: this request gets it, retries get
                // 500, and the handler does not run again for the key
                return fresh(
                  false,
                  `executed; the response ${captured.status} cannot be kept: retries get 500, the handler does not run again`
                )
              }
              return reject(error)
            }
            return Effect.fail(error as E)
          }
        })
      )
    }).pipe(
      // a handler that died answers 500 and holds the key as its defect policy says: say so, with
      // the cause and the operation (never the request's body)
      Effect.tapDefect((cause) =>
        Effect.logWarning(
          "the handler died; its outcome is unknown and the defect policy applies (by default the key " +
            "answers 409 until its lease ends)",
          cause
        ).pipe(Effect.annotateLogs("operation", name))
      ),
      // a client's key is never logged, only its hash
      Effect.annotateLogs("idempotency.key_hash", IdempotencyKey.hash(key))
    )

  const handle = <X, E, R>(
    exchange: Exchange<E, R>,
    downstream: Effect.Effect<Captured<X>, E, R>
  ): Effect.Effect<Answer<X>, E, R | IdempotencyStore.IdempotencyStore> => {
    if (!methods.has(exchange.method)) return Effect.succeed(bypass)
    const withKey = (
      raw: string | null | undefined
    ): Effect.Effect<Answer<X>, E, R | IdempotencyStore.IdempotencyStore> => {
      if (raw === undefined || raw === null) {
        return required
          ? reject(new MissingIdempotencyKey({ source: exchange.keySource ?? keySource }))
          : Effect.succeed(bypass)
      }
      // the key is validated before the body is read or any store is touched
      const key = IdempotencyKey.validate(raw, keyOptions)
      return Either.isLeft(key) ? reject(key.left) : execute(exchange, downstream, key.right)
    }
    return exchange.key === undefined ? withKey(exchange.header(headerName)) : Effect.flatMap(exchange.key, withKey)
  }

  return {
    name,
    maxBodyBytes,
    maxResponseBytes,
    covers: (method) => methods.has(method),
    timeLimitMillis: timeLimitMs,
    marginMillis: marginMs,
    handle
  }
}

/**
 * A request of an HTTP route's operation (see `Operation`): what a client sends, but its key, which
 * is the operation request's `key`, sent in the route's key header.
 *
 * @since 0.1.0
 * @category models
 */
export interface OperationRequest {
  /** Default: the route's own method where it has one (an `HttpApi` endpoint's), else `POST`. */
  readonly method?: string | undefined
  /** The path, with its query. Default: the route's own path where it has one, else `/`. */
  readonly path?: string | undefined
  /** The request's headers, the key's aside. */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /**
   * The body: a `Uint8Array` or a string as it is, any other value as JSON (with `content-type:
   * application/json` unless `headers` has one). Default: none.
   */
  readonly body?: unknown
}

/**
 * The operation behind an idempotent HTTP route, one request at a time, with the route's engine (its
 * name, methods, key header, fingerprint, policies, lease, timeouts) and its handler: give it to
 * `RetryProperty` (`operation: route.operation`) to property-test the configuration you deploy rather
 * than a copy of it. A request's `payload` is an `OperationRequest`, sent with its `key` in the key
 * header; the route's scope is the request's `scope` where it has one. Its cut-off is the request's
 * `deadline`, else its `timeout` from now, else the route's own (`timeLimit`). The value is the
 * response as it is recorded (a replay's without `Idempotent-Replayed`); a problem response fails
 * with its error.
 *
 * @since 0.1.0
 * @category models
 */
export interface Operation<E, R> {
  readonly name: string
  readonly runDetailed: (
    request: Idempotency.Request<OperationRequest>
  ) => Effect.Effect<
    Idempotency.Result<StoredResponse.StoredResponse>,
    E | RequestFailure,
    R | IdempotencyStore.IdempotencyStore
  >
}

const textEncoder = new TextEncoder()

/**
 * The Web request of an operation's request: its key in `header`, its method and path defaulting to
 * the route's (else `POST` and `/`), on `http://localhost`.
 *
 * @since 0.1.0
 * @category utils
 */
export const webRequest = (
  request: Idempotency.Request<OperationRequest>,
  route: {
    readonly header?: string | undefined
    readonly method?: string | undefined
    readonly path?: string | undefined
  }
): Request => {
  const { body, headers, method, path } = request.payload
  const init = new Headers(headers)
  init.set(route.header ?? HEADER, request.key)
  let bytes: Uint8Array | undefined
  if (body instanceof Uint8Array) {
    bytes = body
  } else if (typeof body === "string") {
    bytes = textEncoder.encode(body)
  } else if (body !== undefined) {
    bytes = textEncoder.encode(JSON.stringify(body))
    if (!init.has("content-type")) init.set("content-type", "application/json")
  }
  return new Request(new URL(path ?? route.path ?? "/", "http://localhost"), {
    method: (method ?? route.method ?? "POST").toUpperCase(),
    headers: init,
    ...(bytes === undefined ? {} : { body: bytes as Uint8Array<ArrayBuffer> })
  })
}

/**
 * An `Operation` from the way a route answers one request (`handle`, given the request and its
 * cut-off): the answer is mapped to the operation's result, a problem to its error, and a request the
 * route lets through without idempotency (a method it does not cover) is a defect.
 *
 * @since 0.1.0
 * @category constructors
 */
export const operation = <X, E, R>(
  name: string,
  handle: (request: Idempotency.Request<OperationRequest>, cutOff: number | undefined) => Effect.Effect<Answer<X>, E, R>
): Operation<E, Exclude<R, IdempotencyStore.IdempotencyStore>> => ({
  name,
  runDetailed: (request) =>
    Effect.flatMap(
      request.deadline !== undefined || request.timeout === undefined
        ? Effect.succeed(request.deadline)
        : Effect.map(Clock.currentTimeMillis, (now) => now + Duration.toMillis(Duration.decode(request.timeout!))),
      (cutOff) =>
        Effect.flatMap(
          handle(request, cutOff),
          (answer): Effect.Effect<Idempotency.Result<StoredResponse.StoredResponse>, RequestFailure> => {
            switch (answer._tag) {
              case "Bypass":
                return Effect.dieMessage(
                  `${name}: the route let the request through without idempotency (is its method covered?)`
                )
              case "Fresh":
                return Effect.succeed({
                  value: answer.response,
                  replayed: false,
                  attempt: answer.attempt,
                  recorded: answer.recorded
                })
              case "Replayed": {
                const { "idempotent-replayed": _, ...headers } = answer.response.headers
                return Effect.succeed({
                  value: { ...answer.response, headers },
                  replayed: true,
                  attempt: answer.attempt,
                  recorded: true
                })
              }
              case "Rejected":
                return Effect.fail(answer.error)
            }
          }
        )
    ) as Effect.Effect<
      Idempotency.Result<StoredResponse.StoredResponse>,
      E | RequestFailure,
      Exclude<R, IdempotencyStore.IdempotencyStore> | IdempotencyStore.IdempotencyStore
    >
})
