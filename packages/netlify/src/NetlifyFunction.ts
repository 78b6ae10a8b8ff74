/**
 * Netlify Functions from Effect handlers: `IdempotentFetch.make` with Netlify's time limit as the cut-off (README.md).
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
 * A Netlify Functions handler; `dispose()` releases its instance's runtime.
 *
 * @since 0.1.0
 * @category models
 */
export interface Handler extends IdempotentFetch.Handler<Invocation.NetlifyContext> {}

/**
 * An idempotent function, with its `operation` for `RetryProperty`.
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
  readonly name?: string | undefined
  readonly timeLimit?: Duration.DurationInput | undefined
  readonly onError?: ((error: E) => FunctionResponse.FunctionResponse) | undefined
  readonly interruptOnAbort?: boolean | undefined
  readonly maxBodyBytes?: number | undefined
}

/**
 * The options of a function without idempotency (`make`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<E, ROut, LE> extends CommonOptions<E> {
  readonly layer: Layer.Layer<ROut, LE>
  readonly handler: Effect.Effect<FunctionResponse.FunctionResponse, E, NoInfer<ROut> | Invocation.Invocation>
}

/**
 * The options of `idempotent`; their defaults are in README.md#options.
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
  readonly name: string
  readonly layer: Layer.Layer<ROut | IdempotencyStore.IdempotencyStore, LE>
  readonly payload: Schema.Schema<P, IP>
  readonly handler: (
    payload: P
  ) => Effect.Effect<
    FunctionResponse.FunctionResponse,
    E,
    NoInfer<ROut> | IdempotencyStore.IdempotencyStore | Invocation.Invocation
  >
  readonly key?:
    | KeySource.KeySource<NoInfer<P>>
    | ((payload: NoInfer<P>, invocation: Invocation.Invocation["Type"]) => string | undefined)
    | undefined
  readonly scope?: ((payload: NoInfer<P>, invocation: Invocation.Invocation["Type"]) => string | undefined) | undefined
  readonly onFailure?: ((error: E) => IdempotencyPolicy.FailurePolicy) | undefined
}

/**
 * The default response policy: a 5xx is not recorded, so a retry runs the handler again.
 *
 * @since 0.1.0
 * @category response policies
 */
export const recordUnlessServerError: (response: HttpIdempotency.ResponseHead) => boolean =
  HttpIdempotency.recordUnlessServerError

const decoder = new TextDecoder()

const annotationsOf = (name: string) => (_: Request, context: unknown): Record<string, unknown> => {
  const requestId = (context as Invocation.NetlifyContext | undefined)?.requestId
  return requestId === undefined ? { function: name } : { function: name, requestId }
}

const onErrorOf = <E>(onError: ((error: E) => FunctionResponse.FunctionResponse) | undefined) =>
  onError === undefined ? undefined : (error: E) => FunctionResponse.toWeb(onError(error))

/**
 * A function without idempotency, on the same runtime and error mapping.
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
 * An idempotent function; what it does per invocation is in README.md#per-invocation.
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
            Effect.mapError((error) =>
              new InvalidRequestBody({ reason: "Schema", detail: IdempotencyError.describeParseError(error) })
            )
          )
        ),
        Effect.map((payload): Prepared => ({ payload, invocation }))
      )
    },
    // the canonical payload: see README.md#per-invocation
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
