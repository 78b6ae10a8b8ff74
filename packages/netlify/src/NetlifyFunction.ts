/**
 * Netlify Functions from Effect handlers: `(req: Request, context: Context) => Promise<Response>`.
 *
 * Each handler owns one runtime per warm instance, built from its Layer on the first invocation
 * and reused by the next ones. An idempotent function reads the key of each request (the
 * `Idempotency-Key` header, or a key derived from the payload), runs the handler inside an
 * idempotent operation whose outcome is the response itself (status, selected headers, body),
 * and replays that response to every retry with `Idempotent-Replayed: true`.
 *
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
import { Idempotency, IdempotencyError, IdempotencyKey } from "@effect-idempotency/core"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import type * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as FunctionResponse from "./FunctionResponse.js"
import * as internalInstance from "./internal/instance.js"
import * as Invocation from "./Invocation.js"
import * as KeySource from "./KeySource.js"
import type { NetlifyError } from "./NetlifyError.js"
import { InsufficientTime, InvalidRequestBody, isNetlifyError, MissingIdempotencyKey } from "./NetlifyError.js"
import * as TimeLimit from "./TimeLimit.js"

/**
 * A Netlify Functions handler, with a way to release its instance's runtime (tests, local servers).
 *
 * @since 0.1.0
 * @category models
 */
export interface Handler {
  (request: Request, context: Invocation.NetlifyContext): Promise<Response>
  /** Releases the runtime of this instance (the store's connections, for example). */
  readonly dispose: () => Promise<void>
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
 * An idempotent function.
 *
 * @since 0.1.0
 * @category models
 */
export interface IdempotentOptions<P, IP, E, ROut, LE> extends CommonOptions<E> {
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
   * The time kept between the end of the downstream call and the platform's cut-off, to record the
   * outcome or the timeout policy. Default `TimeLimit.defaultMargin(timeLimit)`.
   */
  readonly margin?: Duration.DurationInput | undefined
  /**
   * How long a reservation blocks other attempts. Default: the time limit (an attempt cannot run
   * longer), or three heartbeats when `heartbeat` is set.
   */
  readonly lease?: Duration.DurationInput | undefined
  /**
   * Extend the lease at this interval while the handler runs. For background functions: a short
   * lease that a heartbeat extends lets Netlify's retries take over a crashed attempt.
   */
  readonly heartbeat?: Duration.DurationInput | undefined
  /** How long a recorded response is replayed. Default 24 hours. */
  readonly ttl?: Duration.DurationInput | undefined
  /**
   * The failure policy for a failure of the handler. Default `release`: a retry runs the handler
   * again. A rejection that retries must see as well is a response (a 4xx), which is stored.
   */
  readonly onFailure?: ((error: E) => IdempotencyPolicy.FailurePolicy) | undefined
  /** The timeout policy. Default `keepLease`. */
  readonly onTimeout?: IdempotencyPolicy.TimeoutPolicy | undefined
  /** What to do while another attempt holds the key. Default: 409 with `Retry-After`. */
  readonly inProgress?: IdempotencyPolicy.InProgressPolicy | undefined
  /** Key validation options (the maximum length). */
  readonly keyOptions?: IdempotencyKey.Options | undefined
  /** The retry of a completion that hit `StoreUnavailable`. */
  readonly completeRetry?: Schedule.Schedule<unknown> | undefined
  /** The response headers kept in the record and replayed. Default `DEFAULT_STORED_HEADERS`. */
  readonly storedHeaders?: ReadonlyArray<string> | undefined
  /**
   * Which responses of the handler are recorded and replayed to retries. A response that is not
   * recorded releases the record: it is returned to this request, and a retry runs the handler
   * again. Default `recordUnlessServerError`: every status below 500 is recorded (a rejection
   * replays), a 5xx is not (a failed request can be retried).
   */
  readonly record?: ((response: FunctionResponse.FunctionResponse) => boolean) | undefined
}

/**
 * The default response policy: record every response below 500; a 5xx releases the record so a
 * retry runs the handler again. (The adapter's own answers, such as 504 for a timeout, are not
 * responses of the handler: the timeout policy decides for them.)
 *
 * @since 0.1.0
 * @category response policies
 */
export const recordUnlessServerError = (response: FunctionResponse.FunctionResponse): boolean => response.status < 500

/** A response the policy chose not to record: carried as a failure, so the record is released. */
class UnrecordedResponse {
  readonly _tag = "UnrecordedResponse"
  constructor(readonly response: FunctionResponse.FunctionResponse) {}
}

/** The full response of a fresh execution (the record keeps selected headers only). */
class FreshResponse extends Context.Tag("@effect-idempotency/netlify/NetlifyFunction/FreshResponse")<
  FreshResponse,
  Ref.Ref<Option.Option<FunctionResponse.FunctionResponse>>
>() {}

const internalError = (): FunctionResponse.FunctionResponse => FunctionResponse.problem(500, "The function failed")

/** Maps every failure to a response, and logs one line per invocation. */
const respond = <E>(
  name: string,
  onError: ((error: E) => FunctionResponse.FunctionResponse) | undefined
) =>
<R>(
  self: Effect.Effect<FunctionResponse.FunctionResponse, E | NetlifyError | IdempotencyError.IdempotencyError, R>
): Effect.Effect<FunctionResponse.FunctionResponse, never, R> =>
  self.pipe(
    Effect.catchAll((error) => {
      if (isNetlifyError(error) || IdempotencyError.isIdempotencyError(error)) {
        const response = FunctionResponse.fromError(error)
        if (error._tag === "DownstreamTimeout" && error.replayed) {
          return Effect.as(
            Effect.logInfo(
              `replayed the stored outcome "unknown" (an earlier attempt timed out) ${response.status}; ` +
                "the handler did not run"
            ).pipe(Effect.annotateLogs({ status: response.status })),
            response
          )
        }
        const log = response.status >= 500 ? Effect.logWarning : Effect.logInfo
        return Effect.as(
          log(`${error._tag}: ${error.message}`).pipe(Effect.annotateLogs({ status: response.status })),
          response
        )
      }
      const response = onError === undefined ? internalError() : onError(error as E)
      return Effect.as(
        Effect.logError("the handler failed", Cause.fail(error)).pipe(
          Effect.annotateLogs({ status: response.status })
        ),
        response
      )
    }),
    Effect.catchAllDefect((defect) =>
      Effect.as(Effect.logError("the handler died", Cause.die(defect)), internalError())
    ),
    Effect.annotateLogs({ function: name })
  )

/** Runs an invocation at the edge: one runtime per instance, the response mapped from the exit. */
const serve = <R>(
  options: {
    readonly name: string
    readonly timeLimit: Duration.Duration
    readonly interruptOnAbort: boolean
    readonly maxBodyBytes: number | undefined
  },
  instance: internalInstance.Instance<R>,
  handle: (
    invocation: Invocation.Invocation["Type"]
  ) => Effect.Effect<FunctionResponse.FunctionResponse, never, R>
): Handler => {
  const invoke = (request: Request, context: Invocation.NetlifyContext) =>
    Effect.gen(function*() {
      const startedAt = yield* Clock.currentTimeMillis
      const runtime = yield* instance.runtime
      const invocation = yield* Invocation.make({
        request,
        context,
        startedAt,
        timeLimit: options.timeLimit,
        maxBodyBytes: options.maxBodyBytes
      })
      // the span runs on the function's runtime, so a tracer from the layer records it
      return yield* handle(invocation).pipe(
        Effect.withSpan("NetlifyFunction.invoke", { attributes: { "netlify.function": options.name } }),
        Effect.provide(runtime)
      )
    }).pipe(
      Effect.catchTag("LayerUnavailable", (error) =>
        Effect.as(
          Effect.logError("the function's layer could not be built", Cause.die(error.cause)),
          FunctionResponse.fromError(error)
        )),
      Effect.annotateLogs(context.requestId === undefined ? {} : { requestId: context.requestId })
    )

  const handler = (request: Request, context: Invocation.NetlifyContext): Promise<Response> =>
    Effect.runPromiseExit(
      invoke(request, context ?? {}),
      options.interruptOnAbort ? { signal: request.signal } : undefined
    ).then((exit) =>
      Exit.isSuccess(exit)
        ? FunctionResponse.toWeb(exit.value)
        : FunctionResponse.toWeb(
          Cause.isInterruptedOnly(exit.cause)
            ? FunctionResponse.problem(503, "The invocation was interrupted")
            : internalError()
        )
    )

  return Object.assign(handler, { dispose: () => Effect.runPromise(instance.dispose) })
}

/**
 * A function without idempotency: one runtime per warm instance, the handler's failures mapped to
 * responses.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <E, ROut, LE>(options: Options<E, ROut, LE>): Handler => {
  const name = options.name ?? "function"
  const instance = Effect.runSync(internalInstance.make(options.layer))
  return serve(
    {
      name,
      timeLimit: Duration.decode(options.timeLimit ?? TimeLimit.synchronous),
      interruptOnAbort: options.interruptOnAbort ?? false,
      maxBodyBytes: options.maxBodyBytes
    },
    instance,
    (invocation) =>
      options.handler.pipe(
        Effect.provideService(Invocation.Invocation, invocation),
        Effect.tap((response) => Effect.logInfo(`responded ${response.status}`)),
        respond(name, options.onError)
      )
  )
}

const parseJson = (text: string): Effect.Effect<unknown, InvalidRequestBody> =>
  text.trim() === "" ? Effect.succeed(undefined) : Effect.try({
    try: () => JSON.parse(text) as unknown,
    catch: () => new InvalidRequestBody({ reason: "NotJson", detail: "the body is not JSON" })
  })

/**
 * An idempotent function. Per invocation:
 *
 * 1. decode the JSON body with `payload` (400 if it does not decode);
 * 2. read the key (400 if it is required and missing, or invalid); without a key and not required,
 *    run the handler without idempotency;
 * 3. reserve the key and run the handler within the time left less `margin`; record the response,
 *    or apply the timeout or failure policy;
 * 4. answer with the fresh response, or replay the recorded one with `Idempotent-Replayed: true`.
 *
 * Failures map to 400, 409 with `Retry-After`, 422, 500, 503 and 504 (see `NetlifyError.httpStatus`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const idempotent = <P, IP, E, ROut, LE>(options: IdempotentOptions<P, IP, E, ROut, LE>): Handler => {
  const name = options.name
  const timeLimit = Duration.decode(options.timeLimit ?? TimeLimit.synchronous)
  const margin = options.margin === undefined ? TimeLimit.defaultMargin(timeLimit) : Duration.decode(options.margin)
  const allowance = TimeLimit.answerAllowance(margin)
  const heartbeat = options.heartbeat === undefined ? undefined : Duration.decode(options.heartbeat)
  const lease = options.lease !== undefined
    ? Duration.decode(options.lease)
    : heartbeat === undefined
    ? timeLimit
    : Duration.times(heartbeat, 3)
  const storedHeaders = options.storedHeaders ?? FunctionResponse.DEFAULT_STORED_HEADERS
  const keySource: KeySource.KeySource<P> = options.key === undefined
    ? KeySource.header()
    : typeof options.key === "function"
    ? KeySource.derive(options.key)
    : options.key
  const decodePayload = Schema.decodeUnknown(options.payload)

  const recordable = options.record ?? recordUnlessServerError

  const operation = Idempotency.make({
    name,
    payload: options.payload,
    success: FunctionResponse.FunctionResponse,
    execute: (payload: P) =>
      options.handler(payload).pipe(
        Effect.tap((response) =>
          Effect.flatMap(
            Effect.serviceOption(FreshResponse),
            Option.match({ onNone: () => Effect.void, onSome: (ref) => Ref.set(ref, Option.some(response)) })
          )
        ),
        Effect.flatMap((response) =>
          recordable(response)
            ? Effect.succeed(FunctionResponse.selectHeaders(response, storedHeaders))
            : Effect.fail(new UnrecordedResponse(response))
        )
      ),
    timeout: timeLimit,
    // the margin is kept between the handler's end and the platform's cut-off: to record the
    // outcome, and, in its last part, to answer
    leaseMargin: Duration.subtract(margin, allowance),
    lease,
    heartbeat,
    ttl: options.ttl,
    onFailure: (error: E | UnrecordedResponse) =>
      error instanceof UnrecordedResponse
        ? "release"
        : options.onFailure === undefined
        ? "release"
        : options.onFailure(error),
    onTimeout: options.onTimeout,
    inProgress: options.inProgress,
    key: options.keyOptions,
    completeRetry: options.completeRetry
  })

  const run = (invocation: Invocation.Invocation["Type"], payload: P, key: string) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const remaining = Duration.millis(Math.max(0, invocation.deadline - now))
      const timeout = TimeLimit.downstreamTimeout(remaining, margin)
      if (Duration.isZero(timeout)) {
        return yield* new InsufficientTime({
          remainingMillis: Duration.toMillis(remaining),
          marginMillis: Duration.toMillis(margin)
        })
      }
      const fresh = yield* Ref.make(Option.none<FunctionResponse.FunctionResponse>())
      const result = yield* operation.runDetailed({
        key,
        payload,
        scope: options.scope?.(payload, invocation),
        // every store call ends before the platform's cut-off, leaving time to answer; the handler
        // ends the margin before the cut-off
        deadline: invocation.deadline - Duration.toMillis(allowance)
      }).pipe(
        Effect.provideService(FreshResponse, fresh),
        Effect.catchIf(
          (error): error is UnrecordedResponse => error instanceof UnrecordedResponse,
          (unrecorded) =>
            Effect.as(
              Effect.logInfo(
                `executed; the response ${unrecorded.response.status} is not recorded: a retry runs the handler again`
              ),
              { value: unrecorded.response, replayed: false, attempt: 0, recorded: false, unrecorded: true }
            )
        )
      )
      if ("unrecorded" in result) return result.value
      if (result.replayed) {
        yield* Effect.logInfo(`replayed the stored response ${result.value.status}; the handler did not run`).pipe(
          Effect.annotateLogs({ attempt: result.attempt })
        )
        return FunctionResponse.markReplayed(result.value)
      }
      yield* Effect.logInfo(
        `executed; ${result.recorded ? "recorded" : "could NOT record"} the response ${result.value.status}`
      ).pipe(Effect.annotateLogs({ attempt: result.attempt, timeoutMillis: Duration.toMillis(timeout) }))
      return Option.getOrElse(yield* Ref.get(fresh), () => result.value)
    }).pipe(
      respond(name, options.onError),
      // the preview is escaped and shortened: a client value is never logged whole or raw
      Effect.annotateLogs({ key: IdempotencyKey.preview(key).slice(1, -1) })
    )

  const handle = (invocation: Invocation.Invocation["Type"]) =>
    Effect.gen(function*() {
      const json = yield* Effect.flatMap(invocation.text, parseJson)
      const payload = yield* decodePayload(json).pipe(
        // where the body broke the schema, bounded, and never any of its values
        Effect.mapError((error) =>
          new InvalidRequestBody({ reason: "Schema", detail: IdempotencyError.describeParseError(error) })
        )
      )
      const key = keySource.read(payload, invocation)
      if (Option.isSome(key)) return yield* run(invocation, payload, key.value)
      if (keySource.required) return yield* new MissingIdempotencyKey({ source: keySource.description })
      const response = yield* options.handler(payload)
      yield* Effect.logInfo(`executed without a key; responded ${response.status}`)
      return response
    }).pipe(
      respond(name, options.onError),
      Effect.provideService(Invocation.Invocation, invocation)
    )

  const instance = Effect.runSync(internalInstance.make(options.layer))
  return serve(
    { name, timeLimit, interruptOnAbort: options.interruptOnAbort ?? false, maxBodyBytes: options.maxBodyBytes },
    instance,
    handle
  )
}
