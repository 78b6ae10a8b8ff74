/**
 * Idempotency for any runtime that speaks Web `Request` and `Response`: Netlify Functions,
 * Cloudflare Workers, Deno, Bun, Hono, Next.js route handlers. A `(request, context?) =>
 * Promise<Response>` handler goes in, the same comes out, with one `ManagedRuntime` per instance
 * (the store's connections are made once, on the first request, and reused). Mount it as the
 * platform asks: `export const POST = handler` (Next.js), `Deno.serve(handler)`, `export default {
 * fetch: handler }` (Bun). On Cloudflare Workers, whose bindings arrive with each request, make one
 * per request: see the package's README.
 *
 * The engine (`HttpIdempotency`) does the rest: the key, the fingerprint, the record, the replays
 * and the problem responses. `make` takes an Effect handler instead, with a step that reads the
 * request once (to derive the key from the body, for example).
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
 * A Web fetch handler, with a way to release its instance's runtime (tests, local servers).
 *
 * @since 0.1.0
 * @category models
 */
export interface Handler<C = unknown> {
  (request: Request, context?: C): Promise<Response>
  /**
   * Builds the instance's runtime now, and resolves once it is built or its build failed (the next
   * request then builds again). Awaited at a module's top level, the build happens while the
   * platform loads the function, before a request's time runs.
   */
  readonly ready: () => Promise<void>
  /** Releases the runtime of this instance (the store's connections, for example). */
  readonly dispose: () => Promise<void>
}

/**
 * An idempotent fetch handler that exposes its operation (see `HttpIdempotency.Operation`): its
 * engine and its handler, one request at a time, for `RetryProperty` (`operation: handler.operation`).
 * The request is made from the operation's request (`HttpIdempotency.webRequest`), without the
 * platform's context; its cut-off is the request's deadline or timeout, else the `timeLimit`.
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
  /** The request. Once its body was read (see `bytes`), a copy over the bytes read, readable again. */
  readonly request: Request
  /** The second argument of the handler (a platform's context), if any. */
  readonly context: C | undefined
  /** When the request was received (epoch milliseconds of the `Clock`). */
  readonly startedAt: number
  /** The body's bytes, read once, at most `maxBodyBytes` of them. */
  readonly bytes: Effect.Effect<Uint8Array, RequestBodyTooLarge | InvalidRequestBody>
  /** The body as UTF-8 text. */
  readonly text: Effect.Effect<string, RequestBodyTooLarge | InvalidRequestBody>
  /**
   * The body as JSON, decoded with a schema. A body that is not JSON, or that the schema rejects,
   * fails with `InvalidRequestBody` (400), whose detail says where the body broke the schema, never
   * any of its values. From `prepare` (`prepare: (incoming) => incoming.json(Order)`), it runs before
   * the key is read: a body that does not decode is answered 400, and nothing is reserved.
   */
  readonly json: <A, I>(
    schema: Schema.Schema<A, I, never>
  ) => Effect.Effect<A, RequestBodyTooLarge | InvalidRequestBody>
}

const decoder = new TextDecoder()

/** A body's text as JSON, decoded with `schema`; the failures say nothing of the body's values. */
const decodeJson = <A, I>(
  text: Effect.Effect<string, RequestBodyTooLarge | InvalidRequestBody>,
  schema: Schema.Schema<A, I, never>
): Effect.Effect<A, RequestBodyTooLarge | InvalidRequestBody> =>
  text.pipe(
    Effect.flatMap((text) =>
      Effect.try({
        try: () => JSON.parse(text) as unknown,
        // the parser's message quotes the body: it is not passed on
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
 * Reads a request's body, never more than `maxBytes` of it: a larger body (declared, or as read)
 * fails with `RequestBodyTooLarge` and is not read further.
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

/** A request whose body is read at most once, by whichever step reads it first. */
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
  /**
   * The answer to a failure of the handler. Default: 500 with a problem body that shows nothing of it.
   * A failure answered below 500 (the application's refusal, a 4xx) is logged at the handler's
   * `logLevel`, with its cause; one answered with a 5xx is logged as an error.
   */
  readonly onError?: ((error: E) => Response) | undefined
  /**
   * Interrupt the handler when the request's `signal` aborts. Default `false`: a handler that keeps
   * running after its client went away records its outcome, which the client's retry then gets. Set
   * it where an abort means the platform stopped the function (an emulator, tests).
   */
  readonly interruptOnAbort?: boolean | undefined
  /** Log annotations of a request (a platform's request id, for example). */
  readonly annotations?: ((request: Request, context: unknown) => Record<string, unknown>) | undefined
}

/**
 * The options of an idempotent fetch handler with an Effect handler. `E` is the error of the steps
 * that read the request (`prepare`, `key`, `scope`, `payload`), `EH` the handler's own (by default
 * the same); `onError` answers either. TypeScript types a callback's parameter with what it has
 * inferred up to it: write `onError` after `handler` (or annotate its parameter), so that it sees
 * the handler's errors.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<C, P, E, ROut, LE, EH = E> extends HttpIdempotency.Options, RuntimeOptions<NoInfer<E | EH>> {
  /** The services of the handler, among them the `IdempotencyStore`; built once per instance. */
  readonly layer: Layer.Layer<ROut | IdempotencyStore.IdempotencyStore, LE>
  /**
   * A schema the JSON body of every covered request must decode with, checked first: a body that is
   * not JSON, or that the schema rejects, is answered 400 (`InvalidRequestBody`) before the key is
   * read, and nothing is reserved. The handler reads the body as it likes (the request's body is
   * readable again). To hand the decoded value to the handler, decode it in `prepare` instead
   * (`prepare: (incoming) => incoming.json(schema)`). Default: none.
   */
  readonly body?: Schema.Schema.AnyNoContext | undefined
  /**
   * Reads what the key, the scope and the handler need from the request, once per request (decodes
   * a JSON body with `incoming.json(schema)`, for example: a body that does not decode is then a
   * 400, and nothing is reserved). It runs before the key is read, for every request.
   */
  readonly prepare?: ((incoming: Incoming<C>) => Effect.Effect<P, E, NoInfer<ROut>>) | undefined
  /**
   * The key, when it does not come from the `Idempotency-Key` header: derived from the body or an
   * event (`undefined`: no key). Default: the header.
   */
  readonly key?: ((prepared: P, incoming: Incoming<C>) => string | undefined) | undefined
  /** Where the key is looked for, for the 400 of a missing key. Default: the header. */
  readonly keySource?: string | undefined
  /**
   * The payload the handler sees, in its encoded form, where `prepare` decodes the body with a
   * schema: the fingerprint then covers its canonical form (members in any order, any whitespace)
   * instead of the body's bytes (see `HttpIdempotency.Exchange.payload`). Default: the body's bytes.
   */
  readonly payload?: ((prepared: P, incoming: Incoming<C>) => Effect.Effect<unknown, E, NoInfer<ROut>>) | undefined
  /**
   * When the platform cuts a request off (epoch milliseconds of the `Clock`), where the platform
   * says so per request (AWS Lambda's remaining time, read from its context). Default: `startedAt +
   * timeLimit` when a `timeLimit` is set, none otherwise.
   */
  readonly cutOff?: ((incoming: Incoming<C>) => number | undefined) | undefined
  /** A tenant or principal id: keys of different scopes never share a record. */
  readonly scope?:
    | ((prepared: P, incoming: Incoming<C>) => Effect.Effect<string | undefined, E, NoInfer<ROut>> | string | undefined)
    | undefined
  /**
   * The handler: called at most once per scoped key while its record lives (within the policies). It
   * reads the attempt (the key, step keys) with `IdempotencyContext.current`.
   */
  readonly handler: (
    prepared: P,
    incoming: Incoming<C>
  ) => Effect.Effect<Response, EH, NoInfer<ROut> | IdempotencyStore.IdempotencyStore>
}

/** The failures of reading a body. */
type BodyFailure = RequestBodyTooLarge | InvalidRequestBody

const internalError = (): Response => StoredResponse.toWeb(StoredResponse.problem(500, "The request failed"))

/**
 * The answer to a failure of the request. A 413 closes the connection (`Connection: close`): the
 * body was left unread past the limit, and a server that kept the connection open would wait for
 * it to be read, or parse what is left of it as the next request.
 */
const rejection = (response: StoredResponse.StoredResponse, error: RequestFailure): Response =>
  StoredResponse.toWeb(
    error instanceof RequestBodyTooLarge ? StoredResponse.setHeaders(response, { connection: "close" }) : response
  )

/**
 * An answer given while the request's body was never read (a missing key, a handler that ignores
 * the body) closes the connection, as a 413 does: a server that kept it open would wait for the
 * body to be read, or parse it as the next request.
 */
const closingIfUnread = (request: Request, response: Response): Response => {
  if (request.body === null || request.bodyUsed || response.headers.has("connection")) return response
  const headers = new Headers(response.headers)
  headers.set("connection", "close")
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers })
}

/**
 * Answers every failure of a handler: a failure of the HTTP layer or of the protocol with its
 * problem response, any other with `onError` (or a 500 that shows nothing of it), a defect with a
 * 500. Each is logged once, by the status it is answered with: below 500 at `logLevel` (default
 * `"Info"`; `make` passes its own, `"Debug"` by default), as the engine logs a client's error; a
 * problem of 500 or more as a warning; a failure of the handler answered with 500 or more (the
 * service failed) as an error, with its cause.
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
      // a failure the application answered with a 4xx is a client's error, not the service's
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
 * Runs an Effect request handler as a Web fetch handler: one runtime per instance, built from
 * `layer` on the first request (503 while it cannot be built; the next request builds it again),
 * and an interruption answered with 503. The handler answers every failure itself.
 *
 * @since 0.1.0
 * @category constructors
 */
export const toHandler = <C, ROut, LE>(
  layer: Layer.Layer<ROut, LE>,
  handle: (request: Request, context: C | undefined, startedAt: number) => Effect.Effect<Response, never, ROut>,
  options?: RuntimeOptions<never> & {
    /**
     * How long a request waits for a cold start: until a point in time (epoch milliseconds of the
     * `Clock`) less a margin, after which it is answered 503 (`InsufficientTime`) and the build goes
     * on for the next request. Default: a request waits for the build.
     */
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
      // measured before the runtime is built: a cold start counts against a time limit
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
 * An idempotent fetch handler from an Effect handler. Per request (see `HttpIdempotency` for the
 * engine): the methods not covered run the handler untouched; the others are prepared, keyed,
 * fingerprinted and run at most once per scoped key, and a retry gets the recorded response with
 * `Idempotent-Replayed: true`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <C = unknown, P = void, E = never, ROut = never, LE = never, EH = E>(
  options: Options<C, P, E, ROut, LE, EH>
): IdempotentHandler<C, E | EH, ROut> => {
  const engine = HttpIdempotency.make(options)
  const logLevelLiteral = options.logLevel ?? "Debug"
  const logLevel = LogLevel.fromLiteral(logLevelLiteral)
  const prepare = options.prepare ?? (() => Effect.void as Effect.Effect<P>)
  // a covered request's body is checked against `body` before anything else reads it
  const body = options.body
  const prepareCovered = (incoming: Incoming<C>): Effect.Effect<P, E | BodyFailure, ROut> =>
    body === undefined ? prepare(incoming) : Effect.zipRight(incoming.json(body), prepare(incoming))
  const key = options.key
  const scope = options.scope
  const payload = options.payload
  /**
   * The engine's answer to a covered request; the operation gives its own cut-off and scope (`override`).
   */
  const answerOf = (
    incoming: Incoming<C>,
    prepared: Effect.Effect<P, E | BodyFailure, ROut>,
    override?: { readonly cutOff: number | undefined; readonly scope: string | undefined }
  ) => {
    const request = incoming.request
    const url = new URL(request.url)
    return engine.handle(
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
        Effect.flatMap((response) => Effect.promise(() => webBody.captureResponse(response, engine.maxResponseBytes))),
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
      const incoming = yield* makeIncoming(request, context, startedAt, engine.maxBodyBytes)
      if (!engine.covers(request.method)) {
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
          return answer.value
        case "Replayed":
          return StoredResponse.toWeb(answer.response)
        case "Rejected":
          return rejection(answer.response, answer.error)
      }
    }).pipe(
      catchFailures({ onError: options.onError, documentation: options.documentation, logLevel: logLevelLiteral }),
      Effect.map((response) => closingIfUnread(request, response))
    )
  const cutOff = options.cutOff
  const timeLimitMillis = engine.timeLimitMillis
  const operation = HttpIdempotency.operation(engine.name, (request, requestCutOff) =>
    Effect.gen(function*() {
      const startedAt = yield* Clock.currentTimeMillis
      const incoming = yield* makeIncoming<C>(
        HttpIdempotency.webRequest(request, { header: options.header }),
        undefined,
        startedAt,
        engine.maxBodyBytes
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
          : cutOff(new IncomingImpl(request, context, startedAt, readBody(request, engine.maxBodyBytes))),
      marginMillis: engine.marginMillis
    }
  })
  // a body that `body` rejects fails the operation with its `RequestFailure`, as every problem does
  return Object.assign(handler, { operation: operation as HttpIdempotency.Operation<E | EH, ROut> })
}

/**
 * The options of `wrap`: those of `make` without the handler (the wrapped one) and the steps of an
 * Effect handler.
 *
 * @since 0.1.0
 * @category models
 */
export interface WrapOptions<C, LE> extends HttpIdempotency.Options, RuntimeOptions<unknown> {
  /** The store (and anything else the scope needs), built once per instance. */
  readonly layer: Layer.Layer<IdempotencyStore.IdempotencyStore, LE>
  /**
   * A schema the JSON body of every covered request must decode with, checked first: a body that is
   * not JSON, or that the schema rejects, is answered 400 before the key is read, and nothing is
   * reserved. Without it, a handler that throws on the body (`await request.json()`) holds the key
   * as any handler that throws does (the defect policy). Default: none.
   */
  readonly body?: Schema.Schema.AnyNoContext | undefined
  /** A tenant or principal id of a request: keys of different scopes never share a record. */
  readonly scope?:
    | ((request: Request, context: C | undefined) => string | undefined | Promise<string | undefined>)
    | undefined
}

/**
 * Makes a Web fetch handler idempotent: `(request, context?) => Promise<Response>` in, the same out.
 * A handler that throws (or rejects) may have written before it did: like a defect in an Effect
 * handler, it is answered with 500 and gets the defect policy (`onDefect`, by default the timeout
 * policy, `keepLease`: a retry gets 409 until the lease ends, then takes over). `onDefect: "release"`
 * lets a retry run it again at once, for handlers that throw only before they write. A body the
 * handler would throw on is refused first with `body` (a schema): 400, and nothing is reserved.
 *
 * @example
 * ```ts
 * import { IdempotencyStore } from "@effect-idempotency/core"
 * import { IdempotentFetch } from "@effect-idempotency/http"
 * import { Schema } from "effect"
 *
 * const Order = Schema.Struct({ sku: Schema.String })
 * // the application's own handler
 * const createOrder = async (request: Request) => ({ orderId: "order-1", sku: (await request.json()).sku })
 * // the store's layer: PostgreSQL, DynamoDB, Redis, or memory in development
 * const StoreLive = IdempotencyStore.layerMemory
 *
 * // a Next.js route handler; `Deno.serve(handler)`; Bun's `export default { fetch: handler }`
 * export const POST = IdempotentFetch.wrap(async (request) => Response.json(await createOrder(request)), {
 *   layer: StoreLive,
 *   body: Order,
 *   scope: (request) => request.headers.get("x-tenant-id") ?? undefined
 * })
 * ```
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
    // a throw is a defect: its outcome is unknown, as for a defect of an Effect handler
    handler: (_, incoming) => Effect.promise(async () => await handler(incoming.request, incoming.context))
  })
}

/**
 * The name of the Durable Object (or shard, or queue partition) that a request's records belong to:
 * the key of its `Idempotency-Key` header in its canonical form, validated as the handler validates
 * it. The header's two spellings of one key, `"k-1"` and `k-1`, are one key to the handler: routed
 * by the raw header they would reach two objects, each with its own records, and each would run the
 * handler. Every request of a record has the same canonical key, so it reaches the object that holds
 * that record, whatever its scope or operation. A missing or invalid key is answered here, with the
 * handler's 400.
 *
 * @example
 * ```ts
 * import { IdempotentFetch } from "@effect-idempotency/http"
 * import { Either } from "effect"
 *
 * interface Env {
 *   readonly ORDERS: {
 *     idFromName(name: string): unknown
 *     get(id: unknown): { fetch(request: Request): Promise<Response> }
 *   }
 * }
 *
 * export const route = (request: Request, env: Env): Promise<Response> => {
 *   const key = IdempotentFetch.routingKey(request)
 *   if (Either.isLeft(key)) return Promise.resolve(key.left)
 *   return env.ORDERS.get(env.ORDERS.idFromName(key.right)).fetch(request)
 * }
 * ```
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
