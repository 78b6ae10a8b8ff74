/**
 * Idempotency for any runtime that speaks Web `Request` and `Response` (see README.md#a-fetch-handler).
 *
 * @example
 * ```ts
 * import { IdempotencyStore } from "@effect-idempotency/core"
 * import { IdempotentFetch } from "@effect-idempotency/http"
 * import { Schema } from "effect"
 *
 * const Order = Schema.Struct({ sku: Schema.String, quantity: Schema.Int })
 *
 * const createOrder = async (request: Request) =>
 *   Response.json({ orderId: crypto.randomUUID(), ...(await request.json()) }, { status: 201 })
 *
 * // a body that is not an order is answered 400 before anything is reserved
 * export const POST = IdempotentFetch.wrap(createOrder, { layer: IdempotencyStore.layerMemory, body: Order })
 * ```
 *
 * @since 0.1.0
 */
import type { IdempotencyStore } from "@effect-idempotency/core"
import { IdempotencyError, IdempotencyKey } from "@effect-idempotency/core"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import type * as Layer from "effect/Layer"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as HttpIdempotency from "./HttpIdempotency.js"
import {
  InsufficientTime,
  InvalidRequestBody,
  isRequestFailure,
  MissingIdempotencyKey,
  RequestBodyTooLarge
} from "./HttpIdempotencyError.js"
import type { RequestFailure } from "./HttpIdempotencyError.js"
import * as webBody from "./internal/webBody.js"
import * as StoredResponse from "./StoredResponse.js"
import * as WarmRuntime from "./WarmRuntime.js"

/**
 * A Web fetch handler, with `ready()` and `dispose()` for its instance's runtime.
 *
 * @since 0.1.0
 * @category models
 */
export interface Handler<C = unknown> {
  (request: Request, context?: C): Promise<Response>
  readonly ready: () => Promise<void>
  readonly dispose: () => Promise<void>
}

/**
 * An idempotent fetch handler, with its `operation` for `RetryProperty`.
 *
 * @since 0.1.0
 * @category models
 */
export interface IdempotentHandler<C, E, R> extends Handler<C> {
  readonly operation: HttpIdempotency.Operation<E, R>
}

/**
 * One request, as a handler sees it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Incoming<C> {
  /** Once its body was read, a copy over the bytes read, readable again. */
  readonly request: Request
  readonly context: C | undefined
  readonly startedAt: number
  readonly bytes: Effect.Effect<Uint8Array, RequestBodyTooLarge | InvalidRequestBody>
  readonly text: Effect.Effect<string, RequestBodyTooLarge | InvalidRequestBody>
  /** The JSON body decoded with a schema; else `InvalidRequestBody` (400), showing none of its values. */
  readonly json: <A, I>(
    schema: Schema.Schema<A, I, never>
  ) => Effect.Effect<A, RequestBodyTooLarge | InvalidRequestBody>
}

const decoder = new TextDecoder()

const decodeJson = <A, I>(
  text: Effect.Effect<string, RequestBodyTooLarge | InvalidRequestBody>,
  schema: Schema.Schema<A, I, never>
): Effect.Effect<A, RequestBodyTooLarge | InvalidRequestBody> =>
  text.pipe(
    Effect.flatMap((text) =>
      Effect.try({
        try: () => JSON.parse(text) as unknown,
        // the parser's message quotes the body
        catch: () => new InvalidRequestBody({ reason: "NotJson", detail: "the body is not JSON" })
      })
    ),
    Effect.flatMap((json) =>
      Effect.mapError(
        Schema.decodeUnknown(schema)(json),
        (error) => new InvalidRequestBody({ reason: "Schema", detail: IdempotencyError.describeParseError(error) })
      )
    )
  )

/**
 * Reads a request's body, never more than `maxBytes` of it (`RequestBodyTooLarge` past it).
 *
 * @since 0.1.0
 * @category utils
 */
export const readBody = (
  request: Request,
  maxBytes: number
): Effect.Effect<Uint8Array, RequestBodyTooLarge | InvalidRequestBody> =>
  Effect.tryPromise({
    try: () => webBody.readRequestBody(request, maxBytes),
    catch: () => new InvalidRequestBody({ reason: "Unreadable", detail: "the body could not be read" })
  }).pipe(Effect.flatMap((bytes) => bytes instanceof RequestBodyTooLarge ? Effect.fail(bytes) : Effect.succeed(bytes)))

class IncomingImpl<C> implements Incoming<C> {
  read: Uint8Array | undefined
  private copy: Request | undefined
  constructor(
    readonly original: Request,
    readonly context: C | undefined,
    readonly startedAt: number,
    readonly bytes: Effect.Effect<Uint8Array, RequestBodyTooLarge | InvalidRequestBody>
  ) {}
  get text() {
    return Effect.map(this.bytes, (bytes) => decoder.decode(bytes))
  }
  json<A, I>(schema: Schema.Schema<A, I, never>) {
    return decodeJson(this.text, schema)
  }
  get request(): Request {
    if (this.read === undefined) return this.original
    this.copy ??= new Request(this.original.url, {
      method: this.original.method,
      headers: this.original.headers,
      body: StoredResponse.bodyInit(this.read),
      signal: this.original.signal
    })
    return this.copy
  }
}

/** The body is read at most once, by whichever step reads it first. */
const makeIncoming = <C>(
  request: Request,
  context: C | undefined,
  startedAt: number,
  maxBodyBytes: number
): Effect.Effect<Incoming<C>> =>
  Effect.suspend(() => {
    let incoming: IncomingImpl<C> | undefined
    return Effect.map(
      Effect.cached(Effect.tap(readBody(request, maxBodyBytes), (bytes) => {
        incoming!.read = bytes
      })),
      (bytes) => (incoming = new IncomingImpl(request, context, startedAt, bytes))
    )
  })

/**
 * Options of every handler: the runtime and the answers to failures.
 *
 * @since 0.1.0
 * @category models
 */
export interface RuntimeOptions<E> {
  readonly onError?: ((error: E) => Response) | undefined
  readonly interruptOnAbort?: boolean | undefined
  readonly annotations?: ((request: Request, context: unknown) => Record<string, unknown>) | undefined
}

/**
 * `E` is the request steps' error, `EH` the handler's: write `onError` after `handler` to see both.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<C, P, E, ROut, LE, EH = E> extends HttpIdempotency.Options, RuntimeOptions<NoInfer<E | EH>> {
  readonly layer: Layer.Layer<ROut | IdempotencyStore.IdempotencyStore, LE>
  /** A schema the JSON body must decode with, checked before the key (README.md#a-fetch-handler). */
  readonly body?: Schema.Schema.AnyNoContext | undefined
  /** Reads what the key, the scope and the handler need, once per request, before the key. */
  readonly prepare?: ((incoming: Incoming<C>) => Effect.Effect<P, E, NoInfer<ROut>>) | undefined
  readonly key?: ((prepared: P, incoming: Incoming<C>) => string | undefined) | undefined
  readonly keySource?: string | undefined
  readonly payload?: ((prepared: P, incoming: Incoming<C>) => Effect.Effect<unknown, E, NoInfer<ROut>>) | undefined
  readonly cutOff?: ((incoming: Incoming<C>) => number | undefined) | undefined
  readonly scope?:
    | ((prepared: P, incoming: Incoming<C>) => Effect.Effect<string | undefined, E, NoInfer<ROut>> | string | undefined)
    | undefined
  readonly handler: (
    prepared: P,
    incoming: Incoming<C>
  ) => Effect.Effect<Response, EH, NoInfer<ROut> | IdempotencyStore.IdempotencyStore>
}

type BodyFailure = RequestBodyTooLarge | InvalidRequestBody

const internalError = (): Response => StoredResponse.toWeb(StoredResponse.problem(500, "The request failed"))

/** See README.md, The rest of a body too large: a 413 closes the connection. */
const rejection = (response: StoredResponse.StoredResponse, error: RequestFailure): Response =>
  StoredResponse.toWeb(
    error instanceof RequestBodyTooLarge ? StoredResponse.setHeaders(response, { connection: "close" }) : response
  )

/** So does an answer given while the body was never read. */
const closingIfUnread = (request: Request, response: Response): Response => {
  if (request.body === null || request.bodyUsed || response.headers.has("connection")) return response
  const headers = new Headers(response.headers)
  headers.set("connection", "close")
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers })
}

/** A CORS response exposes the headers of the protocol's answers (README.md#browsers-and-cors). */
const exposing = (response: Response): Response => {
  if (!response.headers.has("access-control-allow-origin")) return response
  const current = response.headers.get("access-control-expose-headers")
  const merged = StoredResponse.exposeHeaders(current)
  if (merged === current) return response
  const headers = new Headers(response.headers)
  headers.set("access-control-expose-headers", merged)
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers })
}

/**
 * Answers every failure of a handler, logged once by its status (README.md#options, `logLevel`).
 *
 * @since 0.1.0
 * @category combinators
 */
export const catchFailures = <E>(options?: {
  readonly onError?: ((error: E) => Response) | undefined
  readonly documentation?: string | undefined
  readonly logLevel?: LogLevel.Literal | undefined
}) =>
<R>(self: Effect.Effect<Response, E | RequestFailure, R>): Effect.Effect<Response, never, R> => {
  const onError = options?.onError
  const documentation = options?.documentation
  const logLevel = LogLevel.fromLiteral(options?.logLevel ?? "Info")
  return self.pipe(
    Effect.catchAll((error) => {
      if (isRequestFailure(error)) {
        const response = StoredResponse.fromError(error, { documentation })
        return Effect.as(
          Effect.logWithLevel(
            response.status >= 500 ? LogLevel.Warning : logLevel,
            `${error._tag}: ${error.message}`
          ).pipe(Effect.annotateLogs("status", response.status)),
          rejection(response, error)
        )
      }
      const response = onError === undefined ? internalError() : onError(error as E)
      const log = response.status >= 500
        ? Effect.logError("the handler failed", Cause.fail(error))
        : Effect.logWithLevel(logLevel, `the handler failed; answered ${response.status}`, Cause.fail(error))
      return Effect.as(log.pipe(Effect.annotateLogs("status", response.status)), response)
    }),
    Effect.catchAllDefect((defect) =>
      Effect.as(Effect.logError("the handler died", Cause.die(defect)), internalError())
    )
  )
}

/**
 * Runs an Effect request handler as a Web fetch handler, on one runtime per instance.
 *
 * @since 0.1.0
 * @category constructors
 */
export const toHandler = <C, ROut, LE>(
  layer: Layer.Layer<ROut, LE>,
  handle: (request: Request, context: C | undefined, startedAt: number) => Effect.Effect<Response, never, ROut>,
  options?: RuntimeOptions<never> & {
    /** How long a request waits for a cold start; past it, 503 (`InsufficientTime`). */
    readonly coldStart?: {
      readonly until: (request: Request, context: C | undefined, startedAt: number) => number | undefined
      readonly marginMillis: number
    } | undefined
  }
): Handler<C> => {
  const instance = Effect.runSync(WarmRuntime.make(layer))
  const annotations = options?.annotations
  const coldStart = options?.coldStart
  const runtimeFor = (request: Request, context: C | undefined, startedAt: number) => {
    const until = coldStart?.until(request, context, startedAt)
    if (coldStart === undefined || until === undefined) return instance.runtime
    const marginMillis = coldStart.marginMillis
    return Effect.flatMap(
      Effect.timeoutOption(instance.runtime, Duration.millis(Math.max(0, until - marginMillis - startedAt))),
      (built) =>
        Option.isSome(built) ? Effect.succeed(built.value) : Effect.flatMap(
          Clock.currentTimeMillis,
          (now) => Effect.fail(new InsufficientTime({ remainingMillis: Math.max(0, until - now), marginMillis }))
        )
    )
  }
  const invoke = (request: Request, context: C | undefined) =>
    Effect.gen(function*() {
      // before the runtime is built: a cold start counts against a time limit
      const startedAt = yield* Clock.currentTimeMillis
      const runtime = yield* runtimeFor(request, context, startedAt)
      return yield* Effect.provide(handle(request, context, startedAt), runtime)
    }).pipe(
      Effect.catchTags({
        LayerUnavailable: (error) =>
          Effect.as(
            Effect.logError("the handler's layer could not be built", Cause.die(error.cause)),
            StoredResponse.toWeb(StoredResponse.fromError(error))
          ),
        InsufficientTime: (error) =>
          Effect.as(
            Effect.logWarning(`the runtime was not built in time: ${error.message}`),
            StoredResponse.toWeb(StoredResponse.fromError(error))
          )
      }),
      annotations === undefined ? (self) => self : Effect.annotateLogs(annotations(request, context))
    )
  const handler = (request: Request, context?: C): Promise<Response> =>
    Effect.runPromiseExit(
      invoke(request, context),
      options?.interruptOnAbort === true ? { signal: request.signal } : undefined
    ).then((exit) =>
      Exit.isSuccess(exit)
        ? exit.value
        : Cause.isInterruptedOnly(exit.cause)
        ? StoredResponse.toWeb(StoredResponse.problem(503, "The request was interrupted"))
        : internalError()
    )
  return Object.assign(handler, {
    ready: () => Effect.runPromise(Effect.ignore(instance.runtime)),
    dispose: () => Effect.runPromise(instance.dispose)
  })
}

/**
 * An idempotent fetch handler from an Effect handler.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <C = unknown, P = void, E = never, ROut = never, LE = never, EH = E>(
  options: Options<C, P, E, ROut, LE, EH>
): IdempotentHandler<C, E | EH, ROut> => {
  const protocol = HttpIdempotency.make(options)
  const logLevelLiteral = options.logLevel ?? "Debug"
  const logLevel = LogLevel.fromLiteral(logLevelLiteral)
  const prepare = options.prepare ?? (() => Effect.void as Effect.Effect<P>)
  const body = options.body
  const prepareCovered = (incoming: Incoming<C>): Effect.Effect<P, E | BodyFailure, ROut> =>
    body === undefined ? prepare(incoming) : Effect.zipRight(incoming.json(body), prepare(incoming))
  const key = options.key
  const scope = options.scope
  const payload = options.payload
  /** The operation gives its own cut-off and scope (`override`). */
  const answerOf = (
    incoming: Incoming<C>,
    prepared: Effect.Effect<P, E | BodyFailure, ROut>,
    override?: { readonly cutOff: number | undefined; readonly scope: string | undefined }
  ) => {
    const request = incoming.request
    const url = new URL(request.url)
    return protocol.handle(
      {
        method: request.method,
        path: url.pathname,
        query: url.search,
        header: (name) => request.headers.get(name),
        body: incoming.bytes,
        startedAt: incoming.startedAt,
        cutOff: override === undefined ? options.cutOff?.(incoming) : override.cutOff,
        key: key === undefined
          ? Effect.zipRight(
            prepared,
            Effect.succeed(request.headers.get(options.header ?? HttpIdempotency.HEADER) ?? undefined)
          )
          : Effect.map(prepared, (p) => key(p, incoming)),
        scope: override?.scope !== undefined
          ? Effect.succeed(override.scope)
          : scope === undefined
          ? undefined
          : Effect.flatMap(prepared, (p) => {
            const value = scope(p, incoming)
            return Effect.isEffect(value) ? value : Effect.succeed(value)
          }),
        keySource: options.keySource,
        payload: payload === undefined
          ? undefined
          : Effect.flatMap(prepared, (p) => Effect.asSome(payload(p, incoming)))
      },
      Effect.flatMap(prepared, (p) => options.handler(p, incoming)).pipe(
        Effect.flatMap((response) =>
          Effect.promise(() => webBody.captureResponse(response, protocol.maxResponseBytes))
        ),
        Effect.map((captured): HttpIdempotency.Captured<Response> => ({
          status: captured.response.status,
          headers: captured.headers,
          body: captured.body,
          original: captured.response
        }))
      )
    )
  }
  const handle = (request: Request, context: C | undefined, startedAt: number) =>
    Effect.gen(function*() {
      const incoming = yield* makeIncoming(request, context, startedAt, protocol.maxBodyBytes)
      if (!protocol.covers(request.method)) {
        return yield* options.handler(yield* prepare(incoming), incoming)
      }
      const prepared = yield* Effect.cached(prepareCovered(incoming))
      const answer = yield* answerOf(incoming, prepared)
      switch (answer._tag) {
        case "Bypass": {
          const response = yield* Effect.flatMap(prepared, (p) => options.handler(p, incoming))
          yield* Effect.logWithLevel(logLevel, `executed without a key; responded ${response.status}`)
          return response
        }
        case "Fresh":
          return exposing(answer.value)
        case "Replayed":
          return exposing(StoredResponse.toWeb(answer.response))
        case "Rejected":
          return exposing(rejection(answer.response, answer.error))
      }
    }).pipe(
      catchFailures({ onError: options.onError, documentation: options.documentation, logLevel: logLevelLiteral }),
      Effect.map((response) => closingIfUnread(request, response))
    )
  const cutOff = options.cutOff
  const timeLimitMillis = protocol.timeLimitMillis
  const operation = HttpIdempotency.operation(protocol.name, (request, requestCutOff) =>
    Effect.gen(function*() {
      const startedAt = yield* Clock.currentTimeMillis
      const incoming = yield* makeIncoming<C>(
        HttpIdempotency.webRequest(request, { header: options.header }),
        undefined,
        startedAt,
        protocol.maxBodyBytes
      )
      const prepared = yield* Effect.cached(prepareCovered(incoming))
      return yield* answerOf(incoming, prepared, { cutOff: requestCutOff, scope: request.scope })
    }))
  const handler = toHandler(options.layer, handle, {
    ...options,
    coldStart: cutOff === undefined && timeLimitMillis === undefined ? undefined : {
      until: (request, context, startedAt) =>
        cutOff === undefined
          ? startedAt + timeLimitMillis!
          : cutOff(new IncomingImpl(request, context, startedAt, readBody(request, protocol.maxBodyBytes))),
      marginMillis: protocol.marginMillis
    }
  })
  return Object.assign(handler, { operation: operation as HttpIdempotency.Operation<E | EH, ROut> })
}

/**
 * The options of `wrap`: those of `make` without the handler and the steps of an Effect handler.
 *
 * @since 0.1.0
 * @category models
 */
export interface WrapOptions<C, LE> extends HttpIdempotency.Options, RuntimeOptions<unknown> {
  readonly layer: Layer.Layer<IdempotencyStore.IdempotencyStore, LE>
  readonly body?: Schema.Schema.AnyNoContext | undefined
  readonly scope?:
    | ((request: Request, context: C | undefined) => string | undefined | Promise<string | undefined>)
    | undefined
}

/**
 * Makes a Web fetch handler idempotent; a throw follows the defect policy (README.md, Response policy).
 *
 * @since 0.1.0
 * @category constructors
 */
export const wrap = <C = unknown, LE = never>(
  handler: (request: Request, context: C | undefined) => Promise<Response> | Response,
  options: WrapOptions<C, LE>
): IdempotentHandler<C, unknown, never> => {
  const scope = options.scope
  return make<C, void, unknown, never, LE>({
    ...options,
    scope: scope === undefined ?
      undefined :
      (_, incoming) => Effect.tryPromise(async () => await scope(incoming.request, incoming.context)),
    handler: (_, incoming) => Effect.promise(async () => await handler(incoming.request, incoming.context))
  })
}

/**
 * The Durable Object name of a request's records: its key in canonical form (README.md#a-durable-object-per-key).
 *
 * @since 0.1.0
 * @category utils
 */
export const routingKey = (
  request: Request,
  options?: Pick<HttpIdempotency.Options, "header" | "keyOptions" | "documentation">
): Either.Either<IdempotencyKey.IdempotencyKey, Response> => {
  const header = options?.header ?? HttpIdempotency.HEADER
  const raw = request.headers.get(header)
  const key: Either.Either<IdempotencyKey.IdempotencyKey, RequestFailure> = raw === null
    ? Either.left(new MissingIdempotencyKey({ source: `the ${header} header` }))
    : IdempotencyKey.validate(raw, options?.keyOptions)
  return Either.mapLeft(key, (error) =>
    closingIfUnread(
      request,
      StoredResponse.toWeb(StoredResponse.fromError(error, { documentation: options?.documentation }))
    ))
}
