/**
 * Netlify Functions from Effect handlers: `(req: Request, context: Context) => Promise<Response>`.
 *
 * Each handler owns one runtime per warm instance, built from its Layer on the first invocation
 * and reused by the next ones. An idempotent function is the Web fetch handler of
 * `@effect-idempotency/http` (`IdempotentFetch.make`), with Netlify's time limit as the cut-off:
 * it reads the key of each request (the `Idempotency-Key` header, or a key derived from the
 * payload), runs the handler at most once per key, records its response (status, selected headers,
 * body), and replays that response to every retry with `Idempotent-Replayed: true`.
 *
 * @example
 * ```ts
 * // netlify/functions/create-order.ts
 * import { IdempotencyStore } from "@effect-idempotency/core"
 * import { FunctionResponse, NetlifyFunction } from "@effect-idempotency/netlify"
 * import { Effect, Schema } from "effect"
 *
 * export default NetlifyFunction.idempotent({
 *   name: "create-order",
 *   layer: IdempotencyStore.layerMemory,
 *   payload: Schema.Struct({ sku: Schema.String, quantity: Schema.Int }),
 *   timeLimit: "10 seconds",
 *   handler: (order) => Effect.succeed(FunctionResponse.json({ sku: order.sku }, { status: 201 }))
 * })
 * ```
 *
 * @since 0.1.0
 */
import type { IdempotencyPolicy, IdempotencyStore } from "@effect-idempotency/core"
import { IdempotencyError } from "@effect-idempotency/core"
import { HttpIdempotency, IdempotentFetch } from "@effect-idempotency/http"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as FunctionResponse from "./FunctionResponse.js"
import * as Invocation from "./Invocation.js"
import * as KeySource from "./KeySource.js"
import type { NetlifyError } from "./NetlifyError.js"
import { InvalidRequestBody } from "./NetlifyError.js"
import * as TimeLimit from "./TimeLimit.js"

/**
 * A Netlify Functions handler, with a way to release its instance's runtime (tests, local servers).
 *
 * @since 0.1.0
 * @category models
 */
export interface Handler extends IdempotentFetch.Handler<Invocation.NetlifyContext> {}

/**
 * An idempotent function that exposes its operation (see `HttpIdempotency.Operation`): its name,
 * payload schema, key, policies and handler, one request at a time, for `RetryProperty`
 * (`operation: handler.operation`). The request's body is the payload, encoded; it runs without
 * Netlify's context, its cut-off the request's deadline or timeout, else `timeLimit` from its start.
 *
 * @since 0.1.0
 * @category models
 */
export interface IdempotentHandler<E, R> extends Handler {
  readonly operation: HttpIdempotency.Operation<E, R>
}

/**
 * Options shared by every function.
 *
 * @since 0.1.0
 * @category models
 */
export interface CommonOptions<E> {
  /** The name on log lines and spans. */
  readonly name?: string | undefined
  /**
   * The platform's time limit for this function: `TimeLimit.synchronous` (10 seconds, the default),
   * up to `TimeLimit.synchronousMax` (26 seconds), or `TimeLimit.background` (15 minutes).
   */
  readonly timeLimit?: Duration.DurationInput | undefined
  /** The response to a failure of the handler. Default: 500 with a generic problem body. */
  readonly onError?: ((error: E) => FunctionResponse.FunctionResponse) | undefined
  /**
   * Interrupt the handler when the request's `signal` aborts. Default `false`: an idempotent
   * function that keeps running after its client went away records its outcome, which the
   * client's retry then gets. Set it where an abort means the platform stopped the function (an
   * emulator, tests).
   */
  readonly interruptOnAbort?: boolean | undefined
  /**
   * The largest request body read, in bytes: a larger one gets 413 and is not read past the limit.
   * Default `Invocation.DEFAULT_MAX_BODY_BYTES` (1 MiB).
   */
  readonly maxBodyBytes?: number | undefined
}

/**
 * A function without idempotency.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<E, ROut, LE> extends CommonOptions<E> {
  /** The services of the handler, built once per warm instance. */
  readonly layer: Layer.Layer<ROut, LE>
  /** The handler: it reads the request from `Invocation`. */
  readonly handler: Effect.Effect<FunctionResponse.FunctionResponse, E, NoInfer<ROut> | Invocation.Invocation>
}

/**
 * An idempotent function. The policies, times and response options are `HttpIdempotency.Options`'
 * (every HTTP integration takes the same), with Netlify's defaults: the lease is the time limit (or
 * three heartbeats), the margin `TimeLimit.defaultMargin(timeLimit)`, the stored headers
 * `FunctionResponse.DEFAULT_STORED_HEADERS`; the failure policy sees the handler's error type.
 *
 * @since 0.1.0
 * @category models
 */
export interface IdempotentOptions<P, IP, E, ROut, LE> extends
  CommonOptions<E>,
  Pick<
    HttpIdempotency.Options,
    | "margin"
    | "lease"
    | "heartbeat"
    | "ttl"
    | "retryAfter"
    | "onTimeout"
    | "onDefect"
    | "inProgress"
    | "keyOptions"
    | "completeRetry"
    | "storedHeaders"
    | "record"
    | "methods"
    | "maxResponseBytes"
  >
{
  /** The operation's name: the namespace of its records. */
  readonly name: string
  /** The services of the handler, among them the `IdempotencyStore`; built once per warm instance. */
  readonly layer: Layer.Layer<ROut | IdempotencyStore.IdempotencyStore, LE>
  /**
   * The payload: the JSON request body (an empty body reads as `undefined`), decoded with this
   * schema. The request fingerprint is computed over its encoding.
   */
  readonly payload: Schema.Schema<P, IP>
  /**
   * The handler: called at most once per key while its record lives. It reads the attempt (the key,
   * step keys) with `IdempotencyContext.current`, which is `None` when a request without a key runs
   * without idempotency (`key` not required).
   */
  readonly handler: (
    payload: P
  ) => Effect.Effect<
    FunctionResponse.FunctionResponse,
    E,
    NoInfer<ROut> | IdempotencyStore.IdempotencyStore | Invocation.Invocation
  >
  /**
   * Where the key comes from: a `KeySource`, or a function that derives it from the payload (for
   * background and event-triggered functions; a request it returns `undefined` for gets a 400).
   * Default: the `Idempotency-Key` header, required.
   */
  readonly key?:
    | KeySource.KeySource<NoInfer<P>>
    | ((payload: NoInfer<P>, invocation: Invocation.Invocation["Type"]) => string | undefined)
    | undefined
  /** A tenant or user id: keys of different scopes never share a record. */
  readonly scope?: ((payload: NoInfer<P>, invocation: Invocation.Invocation["Type"]) => string | undefined) | undefined
  /**
   * The failure policy for a failure of the handler. Default `release`: a retry runs the handler
   * again. A rejection that retries must see as well is a response (a 4xx), which is stored.
   */
  readonly onFailure?: ((error: E) => IdempotencyPolicy.FailurePolicy) | undefined
}

/**
 * The default response policy: record every response below 500; a 5xx releases the record so a
 * retry runs the handler again. (The adapter's own answers, such as 504 for a timeout, are not
 * responses of the handler: the timeout policy decides for them.)
 *
 * @since 0.1.0
 * @category response policies
 */
export const recordUnlessServerError: (response: HttpIdempotency.ResponseHead) => boolean =
  HttpIdempotency.recordUnlessServerError

const decoder = new TextDecoder()

/** The log annotations of an invocation: the function, and Netlify's request id. */
const annotationsOf = (name: string) => (_: Request, context: unknown): Record<string, unknown> => {
  const requestId = (context as Invocation.NetlifyContext | undefined)?.requestId
  return requestId === undefined ? { function: name } : { function: name, requestId }
}

/** A failure of the handler, answered with `onError` (a `FunctionResponse`), or with 500. */
const onErrorOf = <E>(onError: ((error: E) => FunctionResponse.FunctionResponse) | undefined) =>
  onError === undefined ? undefined : (error: E) => FunctionResponse.toWeb(onError(error))

/**
 * A function without idempotency: one runtime per warm instance, the handler's failures mapped to
 * responses.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <E, ROut, LE>(options: Options<E, ROut, LE>): Handler => {
  const name = options.name ?? "function"
  const timeLimit = Duration.decode(options.timeLimit ?? TimeLimit.synchronous)
  const maxBodyBytes = options.maxBodyBytes ?? Invocation.DEFAULT_MAX_BODY_BYTES
  return IdempotentFetch.toHandler(
    options.layer,
    (request, context: Invocation.NetlifyContext | undefined, startedAt) =>
      Effect.flatMap(
        Effect.cached(Effect.map(IdempotentFetch.readBody(request, maxBodyBytes), (bytes) => decoder.decode(bytes))),
        (text) =>
          options.handler.pipe(
            Effect.provideService(
              Invocation.Invocation,
              Invocation.fromIncoming({ request, context, startedAt, text }, timeLimit)
            ),
            Effect.tap((response) => Effect.logInfo(`responded ${response.status}`)),
            Effect.map(FunctionResponse.toWeb),
            IdempotentFetch.catchFailures({ onError: onErrorOf(options.onError) }),
            // the span runs on the function's runtime, so a tracer from the layer records it
            Effect.withSpan("NetlifyFunction.invoke", { attributes: { "netlify.function": name } })
          )
      ),
    { interruptOnAbort: options.interruptOnAbort, annotations: annotationsOf(name) }
  )
}

const parseJson = (text: string): Effect.Effect<unknown, InvalidRequestBody> =>
  text.trim() === "" ? Effect.succeed(undefined) : Effect.try({
    try: () => JSON.parse(text) as unknown,
    catch: () => new InvalidRequestBody({ reason: "NotJson", detail: "the body is not JSON" })
  })

/**
 * An idempotent function: `IdempotentFetch.make` of `@effect-idempotency/http` with Netlify's time
 * limit. Per invocation:
 *
 * 1. decode the JSON body with `payload` (400 if it does not decode, 413 past `maxBodyBytes`);
 * 2. read the key (400 if it is required and missing, or invalid); without a key and not required,
 *    run the handler without idempotency;
 * 3. reserve the key (its record is scoped by `scope`; the request's fingerprint is its method,
 *    path, query and the decoded payload, encoded back, in canonical form) and run the handler
 *    within the time left less `margin`; record
 *    the response, or apply the timeout or failure policy;
 * 4. answer with the fresh response, or replay the recorded one with `Idempotent-Replayed: true`.
 *
 * Failures map to 400, 409 with `Retry-After`, 413, 422, 500, 503 and 504 (see
 * `NetlifyError.httpStatus`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const idempotent = <P, IP, E, ROut, LE>(
  options: IdempotentOptions<P, IP, E, ROut, LE>
): IdempotentHandler<E | NetlifyError, ROut> => {
  const name = options.name
  const timeLimit = Duration.decode(options.timeLimit ?? TimeLimit.synchronous)
  const keySource: KeySource.KeySource<P> = options.key === undefined
    ? KeySource.header()
    : typeof options.key === "function"
    ? KeySource.derive(options.key)
    : options.key
  const decodePayload = Schema.decodeUnknown(options.payload)
  const encodePayload = Schema.encode(options.payload)
  const scope = options.scope
  const onFailure = options.onFailure

  interface Prepared {
    readonly payload: P
    readonly invocation: Invocation.Invocation["Type"]
  }

  return IdempotentFetch.make<Invocation.NetlifyContext, Prepared, E | NetlifyError, ROut, LE>({
    name,
    layer: options.layer,
    timeLimit,
    margin: options.margin,
    lease: options.lease,
    heartbeat: options.heartbeat,
    ttl: options.ttl,
    retryAfter: options.retryAfter,
    onTimeout: options.onTimeout,
    onDefect: options.onDefect,
    inProgress: options.inProgress,
    keyOptions: options.keyOptions,
    completeRetry: options.completeRetry,
    storedHeaders: options.storedHeaders ?? FunctionResponse.DEFAULT_STORED_HEADERS,
    record: options.record,
    methods: options.methods,
    maxBodyBytes: options.maxBodyBytes,
    maxResponseBytes: options.maxResponseBytes,
    interruptOnAbort: options.interruptOnAbort,
    onFailure: onFailure === undefined ? undefined : (error) => onFailure(error as E),
    onError: onErrorOf(options.onError as ((error: E | NetlifyError) => FunctionResponse.FunctionResponse) | undefined),
    annotations: annotationsOf(name),
    logLevel: "Info",
    prepare: (incoming) => {
      const invocation = Invocation.fromIncoming(incoming, timeLimit)
      return incoming.text.pipe(
        Effect.flatMap(parseJson),
        Effect.flatMap((json) =>
          decodePayload(json).pipe(
            // where the body broke the schema, bounded, and never any of its values
            Effect.mapError((error) =>
              new InvalidRequestBody({ reason: "Schema", detail: IdempotencyError.describeParseError(error) })
            )
          )
        ),
        Effect.map((payload): Prepared => ({ payload, invocation }))
      )
    },
    // the fingerprint covers the payload the handler gets, in its canonical form: a retry whose JSON has
    // its members in another order, or other whitespace, is the same request
    payload: (prepared) =>
      encodePayload(prepared.payload).pipe(
        Effect.mapError((error) =>
          new InvalidRequestBody({ reason: "Schema", detail: IdempotencyError.describeParseError(error) })
        )
      ),
    key: (prepared) => Option.getOrUndefined(keySource.read(prepared.payload, prepared.invocation)),
    required: keySource.required,
    keySource: keySource.description,
    scope: scope === undefined ? undefined : (prepared) => scope(prepared.payload, prepared.invocation),
    handler: (prepared) =>
      options.handler(prepared.payload).pipe(
        Effect.provideService(Invocation.Invocation, prepared.invocation),
        Effect.map(FunctionResponse.toWeb)
      )
  })
}
