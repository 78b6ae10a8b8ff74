/**
 * The IETF Idempotency-Key draft, implemented once for every HTTP integration (see README.md).
 *
 * @example
 * ```ts
 * import { HttpIdempotency } from "@effect-idempotency/http"
 *
 * const protocol = HttpIdempotency.make({ name: "orders", storedHeaders: ["content-type", "location"] })
 * // protocol.handle(exchange, downstream): see IdempotentFetch for a whole integration
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
import { globalValue } from "effect/GlobalValue"
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
 * The largest response body kept by default: 1 MiB (README.md#what-a-request-gets).
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024

/**
 * The response headers kept and replayed by default (README.md#semantics-and-the-choices-where-the-draft-is-open).
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
 * What the response policy sees of a response (lower-case header names).
 *
 * @since 0.1.0
 * @category models
 */
export interface ResponseHead {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
}

/**
 * The default response policy: a 5xx is not recorded, so a retry runs the handler again.
 *
 * @since 0.1.0
 * @category response policies
 */
export const recordUnlessServerError = (response: ResponseHead): boolean => response.status < 500

/**
 * The statuses that say the request was not processed and may be sent again: 408, 425, 429, 503.
 *
 * @since 0.1.0
 * @category constants
 */
export const TRANSIENT_STATUSES: ReadonlySet<number> = new Set([408, 425, 429, 503])

/**
 * A response policy for handlers whose 5xx may come after a write: every response is recorded but
 * one of `TRANSIENT_STATUSES`, so a 500, 502 or 504 is replayed rather than run again
 * (README.md#which-outcomes-are-kept).
 *
 * @since 0.1.0
 * @category response policies
 */
export const recordUnlessTransient = (response: ResponseHead): boolean => !TRANSIENT_STATUSES.has(response.status)

/**
 * The options of an idempotent route; their defaults are in README.md#options.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options extends Idempotency.Settings {
  readonly name?: string | undefined
  readonly methods?: ReadonlyArray<string> | undefined
  readonly header?: string | undefined
  readonly required?: boolean | undefined
  readonly keyOptions?: IdempotencyKey.Options | undefined
  readonly fingerprintHeaders?: ReadonlyArray<string> | undefined
  readonly query?: "include" | "ignore" | undefined
  readonly maxBodyBytes?: number | undefined
  readonly maxResponseBytes?: number | undefined
  readonly storedHeaders?: ReadonlyArray<string> | undefined
  readonly record?: ((response: ResponseHead) => boolean) | undefined
  readonly onFailure?: ((error: unknown) => IdempotencyPolicy.FailurePolicy) | undefined
  readonly timeLimit?: Duration.DurationInput | undefined
  readonly margin?: Duration.DurationInput | undefined
  readonly documentation?: string | undefined
  readonly retryAfter?: Duration.DurationInput | undefined
  readonly logLevel?: LogLevel.Literal | undefined
}

/**
 * One request as the protocol sees it (method upper case, header names lower case).
 *
 * @since 0.1.0
 * @category models
 */
export interface Exchange<E, R> {
  readonly method: string
  readonly path: string
  readonly query: string
  readonly header: (name: string) => string | null | undefined
  readonly body: Effect.Effect<Uint8Array, RequestBodyTooLarge | InvalidRequestBody>
  readonly startedAt?: number | undefined
  /** A platform's cut-off of this request (AWS Lambda's), in place of `startedAt + timeLimit`. */
  readonly cutOff?: number | undefined
  /** The key, where it does not come from the header; `undefined`: no key. */
  readonly key?: Effect.Effect<string | undefined, E, R> | undefined
  readonly scope?: Effect.Effect<string | undefined, E, R> | undefined
  readonly keySource?: string | undefined
  /** The payload encoded, where a schema decoded the body: the fingerprint covers its canonical form. */
  readonly payload?: Effect.Effect<Option.Option<unknown>, E | InvalidRequestBody, R> | undefined
}

/**
 * A response of the handler; `body` is `undefined` when it cannot be read whole (not replayable).
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
 * What the integration answers: `Bypass` runs the handler as if there were no middleware.
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
    readonly attempt: number
  }
  | { readonly _tag: "Replayed"; readonly response: StoredResponse.StoredResponse; readonly attempt: number }
  | { readonly _tag: "Rejected"; readonly response: StoredResponse.StoredResponse; readonly error: RequestFailure }

/**
 * The protocol of one route: the options resolved once, and the protocol's operation built once.
 *
 * @since 0.1.0
 * @category models
 */
export interface HttpIdempotency {
  readonly name: string
  readonly maxBodyBytes: number
  readonly maxResponseBytes: number
  readonly covers: (method: string) => boolean
  readonly timeLimitMillis: number | undefined
  readonly marginMillis: number
  /** `downstream` runs at most once, and only for a `Fresh` answer. */
  readonly handle: <X, E, R>(
    exchange: Exchange<E, R>,
    downstream: Effect.Effect<Captured<X>, E, R>
  ) => Effect.Effect<Answer<X>, E, R | IdempotencyStore.IdempotencyStore>
}

/**
 * What makes two requests with one key the same request.
 *
 * @since 0.1.0
 * @category models
 */
export interface RequestFingerprint {
  readonly method: string
  readonly path: string
  readonly query: string
  readonly headers: ReadonlyArray<string>
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
 * Checked as it is (it is JSON already), with no transformation to run per request.
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
 * The fingerprint of a request as the protocol records it, for inspection and tests.
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

/** A response the policy chose not to record: a failure, so the record is released. */
class Unrecorded {
  readonly _tag = "Unrecorded"
}

/** The body of a response not read whole: it never encodes, so it is recorded as omitted. */
const NOT_KEPT = new Uint8Array(0)

/** The current request's downstream, provided per request to the operation built once. */
class Downstream extends Context.Tag("@effect-idempotency/http/HttpIdempotency/Downstream")<
  Downstream,
  Effect.Effect<StoredResponse.StoredResponse, unknown>
>() {}

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

/** Coded by hand: it runs twice per fresh request and once per replay. */
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

/** The operations that have warned of a request with credentials and no scope: once per process each. */
const warnedUnscoped = globalValue(
  Symbol.for("@effect-idempotency/http/HttpIdempotency/warnedUnscoped"),
  () => new Set<string>()
)

const carriesCredentials = <E, R>(exchange: Exchange<E, R>): boolean =>
  (exchange.header("authorization") ?? "") !== "" || (exchange.header("cookie") ?? "") !== ""

const warnUnscoped = (name: string): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (warnedUnscoped.has(name)) return Effect.void
    warnedUnscoped.add(name)
    return Effect.logWarning(
      "idempotency: a request carries credentials (Authorization or Cookie) and has no scope: the keys of every " +
        "caller share one namespace, so two users who send the same key share one record and one gets the " +
        "other's response. Set `scope` to the authenticated principal (a user id, a tenant)"
    ).pipe(Effect.annotateLogs("operation", name))
  })

/**
 * Builds the protocol of one route: the options are resolved and the operation is built here, once.
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

  // See README.md, Time
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
    // See README.md, Conflict
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
      if (scope === undefined && carriesCredentials(exchange)) yield* warnUnscoped(name)

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
        // the downstream runs in a child fiber of this one: its requirements are the returned effect's
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
                // See README.md#what-a-request-gets: a response that could not be kept
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
      Effect.tapDefect((cause) =>
        Effect.logWarning(
          "the handler died; its outcome is unknown and the defect policy applies (by default the key " +
            "answers 409 until its lease ends)",
          cause
        ).pipe(Effect.annotateLogs("operation", name))
      ),
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
      // before the body is read or any store is touched
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
 * A request of an HTTP route's `Operation`, its key aside (sent in the route's key header).
 *
 * @since 0.1.0
 * @category models
 */
export interface OperationRequest {
  /** Default: the route's own method where it has one, else `POST`. */
  readonly method?: string | undefined
  /** With its query. Default: the route's own path where it has one, else `/`. */
  readonly path?: string | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** Bytes or a string as they are, any other value as JSON. */
  readonly body?: unknown
}

/**
 * The operation behind an idempotent HTTP route, for `RetryProperty` (README.md#a-fetch-handler).
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
 * The Web request of an operation's request, on `http://localhost`.
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
 * An `Operation` from the way a route answers one request; a `Bypass` answer is a defect.
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
