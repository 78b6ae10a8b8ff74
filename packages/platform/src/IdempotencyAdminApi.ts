/**
 * The admin service (`IdempotencyAdmin`) over HTTP, for a store that only its platform reaches: its
 * endpoints, token and logs are in README.md#the-admin-service-over-http.
 *
 * @example
 * ```ts
 * import { IdempotencyAdmin, IdempotencyStore } from "@effect-idempotency/core"
 * import { IdempotencyAdminApi } from "@effect-idempotency/platform"
 * import { Layer, Redacted } from "effect"
 *
 * // in a Worker, the store's layer is made from the request's env (a D1 binding): see the README
 * const { dispose, handler } = IdempotencyAdminApi.toWebHandler({
 *   layer: IdempotencyAdmin.layer.pipe(Layer.provideMerge(IdempotencyStore.layerMemory)),
 *   token: Redacted.make("a-long-random-token-from-a-secret"),
 *   prefix: "/admin"
 * })
 * handler(
 *   new Request("http://localhost/admin/stats", { headers: { authorization: "Bearer a-long-random-token-from-a-secret" } })
 * )
 *   .then((response) => console.log(response.status)) // 200
 *   .finally(dispose)
 * ```
 *
 * @since 0.1.0
 */
import { IdempotencyAdmin, IdempotencyError, IdempotencyKey } from "@effect-idempotency/core"
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpApiSecurity from "@effect/platform/HttpApiSecurity"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"

// the wire

const State = Schema.Literal("running", "stuck", "completed", "unknown", "omitted", "failed")

const Name = Schema.String.pipe(Schema.maxLength(512))

/**
 * `IdempotencyAdmin.RecordInfo` without the fencing token.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RecordInfo = Schema.Struct({
  operation: Schema.String,
  scope: Schema.optional(Schema.String),
  key: Schema.String,
  recordId: Schema.String,
  status: Schema.Literal("IN_PROGRESS", "COMPLETED", "FAILED"),
  state: State,
  attempt: Schema.Number,
  leaseUntil: Schema.Number,
  expiresAt: Schema.Number,
  fingerprint: Schema.String,
  outcome: Schema.optional(
    Schema.Struct({ kind: Schema.Literal("Success", "Failure", "Timeout", "Omitted"), bytes: Schema.Number })
  ),
  outcomeText: Schema.optional(Schema.String),
  readAt: Schema.Number
})

/**
 * The request carried no token, or not the endpoint's.
 *
 * @since 0.1.0
 * @category errors
 */
export class Unauthorized extends Schema.TaggedError<Unauthorized>(
  "@effect-idempotency/platform/IdempotencyAdminApi/Unauthorized"
)("Unauthorized", {}, HttpApiSchema.annotations({ status: 401 })) {
  override get message(): string {
    return "the admin endpoint refused the request's token"
  }
}

/**
 * No record of the key (or it has expired).
 *
 * @since 0.1.0
 * @category errors
 */
export class NoRecord extends Schema.TaggedError<NoRecord>("@effect-idempotency/platform/IdempotencyAdminApi/NoRecord")(
  "NoRecord",
  {},
  HttpApiSchema.annotations({ status: 404 })
) {}

/**
 * The token is shorter than `MIN_TOKEN_LENGTH`: a token that short can be guessed.
 *
 * @since 0.1.0
 * @category errors
 */
export class WeakToken
  extends Schema.TaggedError<WeakToken>("@effect-idempotency/platform/IdempotencyAdminApi/WeakToken")(
    "WeakToken",
    { length: Schema.Number }
  )
{
  override get message(): string {
    return `the admin endpoint's token has ${this.length} characters; it needs at least ${MIN_TOKEN_LENGTH}`
  }
}

/**
 * The shortest token the endpoint accepts.
 *
 * @since 0.1.0
 * @category constants
 */
export const MIN_TOKEN_LENGTH = 16

/**
 * The bearer token check every endpoint of the API passes through.
 *
 * @since 0.1.0
 * @category middleware
 */
export class Authorization extends HttpApiMiddleware.Tag<Authorization>()(
  "@effect-idempotency/platform/IdempotencyAdminApi/Authorization",
  { failure: Unauthorized, security: { bearer: HttpApiSecurity.bearer } }
) {}

const Target = {
  operation: Name,
  key: Schema.String.pipe(Schema.maxLength(4096)),
  scope: Schema.optional(Name)
}

/**
 * The admin service's five actions, behind `Authorization`.
 *
 * @since 0.1.0
 * @category api
 */
export class AdminGroup extends HttpApiGroup.make("idempotencyAdmin")
  .add(
    // See README.md#the-admin-service-over-http: keys travel in bodies
    HttpApiEndpoint.post("get", "/record")
      .setPayload(Schema.Struct({ ...Target, outcome: Schema.optional(Schema.Boolean) }))
      .addSuccess(RecordInfo)
      .addError(NoRecord)
      .addError(IdempotencyAdmin.InvalidTarget, { status: 400 })
  )
  .add(
    HttpApiEndpoint.get("list", "/records")
      .setUrlParams(Schema.Struct({
        state: Schema.optional(State),
        operation: Schema.optional(Name),
        olderThanMillis: Schema.optional(Schema.NumberFromString.pipe(Schema.finite(), Schema.nonNegative())),
        limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 1000))),
        cursor: Schema.optional(Schema.String.pipe(Schema.maxLength(4096)))
      }))
      .addSuccess(Schema.Struct({ records: Schema.Array(RecordInfo), cursor: Schema.optional(Schema.String) }))
  )
  .add(
    HttpApiEndpoint.post("unblock", "/unblock")
      .setPayload(Schema.Struct({
        ...Target,
        reason: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(1000)),
        attempt: Schema.Int.pipe(Schema.positive())
      }))
      .addSuccess(Schema.Struct({ unblocked: Schema.Literal(true) }))
      .addError(IdempotencyAdmin.UnblockRefused, { status: 409 })
      .addError(IdempotencyAdmin.InvalidTarget, { status: 400 })
  )
  .add(
    HttpApiEndpoint.get("stats", "/stats")
      .addSuccess(Schema.Struct({
        counts: Schema.Array(Schema.Struct({ operation: Schema.String, state: State, count: Schema.Number }))
      }))
  )
  .add(
    HttpApiEndpoint.post("purge", "/purge")
      .setPayload(Schema.Struct({ limit: Schema.optional(Schema.Int.pipe(Schema.between(1, 100_000))) }))
      .addSuccess(Schema.Struct({ purged: Schema.Number }))
  )
  .addError(IdempotencyError.StoreUnavailable, { status: 503 })
  .addError(IdempotencyError.StoreError, { status: 500 })
  .middleware(Authorization)
{}

/**
 * `AdminGroup` alone; add the group to an `HttpApi` of your own to serve it beside others.
 *
 * @since 0.1.0
 * @category api
 */
export class AdminApi extends HttpApi.make("idempotencyAdmin").add(AdminGroup) {}

// the server

const digest = (text: string) =>
  Effect.promise(() => crypto.subtle.digest("SHA-256", new TextEncoder().encode(text))).pipe(
    Effect.map((buffer) => new Uint8Array(buffer))
  )

/** Looks at every byte, whatever the first difference: see README.md#the-admin-service-over-http. */
const sameDigest = (a: Uint8Array, b: Uint8Array): boolean => {
  let difference = a.length ^ b.length
  for (let i = 0; i < a.length && i < b.length; i++) difference |= a[i]! ^ b[i]!
  return difference === 0
}

/**
 * The `Authorization` middleware for a token; the layer fails with `WeakToken` if it is too short.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerAuthorization = (token: Redacted.Redacted<string>): Layer.Layer<Authorization, WeakToken> =>
  Layer.effect(
    Authorization,
    Effect.gen(function*() {
      const expected = Redacted.value(token)
      if (expected.length < MIN_TOKEN_LENGTH) return yield* new WeakToken({ length: expected.length })
      const expectedDigest = yield* digest(expected)
      return {
        bearer: (presented) =>
          Effect.flatMap(
            digest(Redacted.value(presented)),
            (presentedDigest) =>
              sameDigest(presentedDigest, expectedDigest)
                ? Effect.void
                : Effect.zipRight(
                  Effect.logWarning("idempotency admin: a request with a wrong or missing token was refused"),
                  Effect.fail(new Unauthorized())
                )
          )
      }
    })
  )

const MAX_CAUSE_LENGTH = 300

/** No driver object, no stack on the wire. */
const forWire = (error: IdempotencyError.StoreFailure): IdempotencyError.StoreFailure => {
  const cause = error.cause
  const text = cause instanceof Error
    ? `${cause.name}: ${cause.message}`
    : typeof cause === "string"
    ? cause
    : "the store failed"
  const bounded = text.length > MAX_CAUSE_LENGTH ? `${text.slice(0, MAX_CAUSE_LENGTH)}…` : text
  return error._tag === "StoreUnavailable"
    ? new IdempotencyError.StoreUnavailable({ method: error.method, cause: bounded })
    : new IdempotencyError.StoreError({ method: error.method, cause: bounded })
}

const isStoreFailure = (error: { readonly _tag: string }): error is IdempotencyError.StoreFailure =>
  error._tag === "StoreUnavailable" || error._tag === "StoreError"

const audited = <A, E extends { readonly _tag: string }>(
  action: string,
  target: { readonly operation?: string | undefined; readonly key?: string | undefined },
  effect: Effect.Effect<A, E>
): Effect.Effect<A, E> =>
  effect.pipe(
    Effect.mapError((error) => (isStoreFailure(error) ? forWire(error) : error) as E),
    Effect.onExit((exit) =>
      Effect.logInfo(`idempotency admin: ${action}`).pipe(
        Effect.annotateLogs({
          "idempotency.admin.action": action,
          "idempotency.admin.result": Exit.isSuccess(exit)
            ? "ok"
            : Option.match(Cause.failureOption(exit.cause), {
              onNone: () => Cause.isInterruptedOnly(exit.cause) ? "interrupted" : "defect",
              onSome: (error) => error._tag
            }),
          ...(target.operation === undefined ? {} : { "idempotency.operation": target.operation }),
          ...(target.key === undefined ? {} : { "idempotency.key_hash": IdempotencyKey.hash(target.key) })
        })
      )
    )
  )

const targetOf = (params: { readonly operation: string; readonly key: string; readonly scope?: string | undefined }) =>
  params.scope === undefined
    ? { operation: params.operation, key: params.key }
    : { operation: params.operation, key: params.key, scope: params.scope }

const wireRecord = (record: IdempotencyAdmin.RecordInfo): typeof RecordInfo.Type => {
  const { outcome, scope, ...rest } = record
  return { ...rest, ...(scope === undefined ? {} : { scope }), ...(outcome === undefined ? {} : { outcome }) }
}

/**
 * The handlers of `AdminGroup` over the `IdempotencyAdmin` of the context, with the token check.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: {
  readonly token: Redacted.Redacted<string>
}): Layer.Layer<
  HttpApiGroup.ApiGroup<"idempotencyAdmin", "idempotencyAdmin">,
  WeakToken,
  IdempotencyAdmin.IdempotencyAdmin
> =>
  HttpApiBuilder.group(
    AdminApi,
    "idempotencyAdmin",
    (handlers) =>
      Effect.map(IdempotencyAdmin.IdempotencyAdmin, (admin) =>
        handlers
          .handle("get", ({ payload }) =>
            audited(
              "inspect",
              payload,
              admin.get(targetOf(payload), { outcome: payload.outcome === true }).pipe(
                Effect.flatMap(Option.match({
                  onNone: () => Effect.fail(new NoRecord()),
                  onSome: (record) => Effect.succeed(wireRecord(record))
                }))
              )
            ))
          .handle("list", ({ urlParams }) =>
            audited(
              "list",
              urlParams,
              admin.list({
                state: urlParams.state,
                operation: urlParams.operation,
                olderThan: urlParams.olderThanMillis === undefined
                  ? undefined
                  : Duration.millis(urlParams.olderThanMillis),
                limit: urlParams.limit,
                cursor: urlParams.cursor
              }).pipe(Effect.map((page) => ({
                records: page.records.map(wireRecord),
                ...(page.cursor === undefined ? {} : { cursor: page.cursor })
              })))
            ))
          .handle("unblock", ({ payload }) =>
            audited(
              "unblock",
              payload,
              Effect.as(
                admin.unblock(targetOf(payload), { reason: payload.reason, expect: { attempt: payload.attempt } }),
                { unblocked: true as const }
              )
            ))
          .handle("stats", () => audited("stats", {}, Effect.map(admin.stats, (counts) => ({ counts }))))
          .handle(
            "purge",
            ({ payload }) =>
              audited("purge", {}, Effect.map(admin.purge({ limit: payload.limit }), (purged) => ({ purged })))
          ))
  ).pipe(Layer.provide(layerAuthorization(options.token)))

/**
 * A Web fetch handler serving the API under `prefix`; it throws `WeakToken` for a short token.
 *
 * @since 0.1.0
 * @category handlers
 */
export const toWebHandler = <E>(options: {
  readonly layer: Layer.Layer<IdempotencyAdmin.IdempotencyAdmin, E>
  readonly token: Redacted.Redacted<string>
  readonly prefix?: `/${string}` | undefined
}): {
  readonly handler: (request: Request) => Promise<Response>
  readonly dispose: () => Promise<void>
} => {
  const length = Redacted.value(options.token).length
  if (length < MIN_TOKEN_LENGTH) throw new WeakToken({ length })
  const web = HttpApiBuilder.toWebHandler(
    HttpApiBuilder.api(AdminApi).pipe(
      Layer.provide(layer({ token: options.token })),
      Layer.provide(options.layer),
      Layer.merge(HttpServer.layerContext)
    )
  )
  const prefix = options.prefix?.replace(/\/+$/, "")
  if (prefix === undefined || prefix === "") return { handler: (request) => web.handler(request), dispose: web.dispose }
  return {
    handler: (request) => {
      const url = new URL(request.url)
      if (url.pathname !== prefix && !url.pathname.startsWith(`${prefix}/`)) {
        return Promise.resolve(new Response(null, { status: 404 }))
      }
      url.pathname = url.pathname.slice(prefix.length) || "/"
      return web.handler(new Request(url, request))
    },
    dispose: web.dispose
  }
}

// the client

const storeFailureOf = (method: string, error: { readonly _tag: string }): IdempotencyError.StoreFailure => {
  switch (error._tag) {
    case "StoreUnavailable":
    case "StoreError":
      return error as IdempotencyError.StoreFailure
    case "RequestError":
      return new IdempotencyError.StoreUnavailable({ method, cause: error })
    default:
      return new IdempotencyError.StoreError({ method, cause: error })
  }
}

/**
 * How long a request to the endpoint may take, by default: past it the call fails with
 * `StoreUnavailable`.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_REQUEST_TIMEOUT: Duration.Duration = Duration.seconds(30)

/**
 * The admin service through an endpoint that serves the API, mounted at `baseUrl`; its failures
 * are in README.md#the-admin-service-over-http.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerClient = (options: {
  readonly baseUrl: string | URL
  readonly token: Redacted.Redacted<string>
  readonly requestTimeout?: Duration.DurationInput | undefined
}): Layer.Layer<IdempotencyAdmin.IdempotencyAdmin, never, HttpClient.HttpClient> =>
  Layer.effect(
    IdempotencyAdmin.IdempotencyAdmin,
    Effect.gen(function*() {
      const client = yield* HttpApiClient.make(AdminApi, {
        baseUrl: options.baseUrl,
        transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(Redacted.value(options.token)))
      })
      const timeout = options.requestTimeout ?? DEFAULT_REQUEST_TIMEOUT
      const call = <A, E extends { readonly _tag: string }, K extends E>(
        method: string,
        effect: Effect.Effect<A, E>,
        keep: (error: E) => error is K
      ): Effect.Effect<A, K | IdempotencyError.StoreFailure> =>
        effect.pipe(
          Effect.mapError((error): K | IdempotencyError.StoreFailure =>
            keep(error) ? error : storeFailureOf(method, error)
          ),
          Effect.timeoutFail({
            duration: timeout,
            onTimeout: () =>
              new IdempotencyError.StoreUnavailable({ method, cause: "the admin endpoint did not answer in time" })
          })
        )
      const none = (_: { readonly _tag: string }): _ is never => false
      const fromWire = (record: typeof RecordInfo.Type): IdempotencyAdmin.RecordInfo => ({
        ...record,
        scope: record.scope,
        outcome: record.outcome
      })
      const api = client.idempotencyAdmin
      return {
        get: (target, getOptions) =>
          call(
            "get",
            api.get({
              payload: {
                ...targetOf(target),
                ...(getOptions?.outcome === true ? { outcome: true } : {})
              }
            }).pipe(
              Effect.map((record) => Option.some(fromWire(record))),
              Effect.catchTag("NoRecord", () => Effect.succeed(Option.none()))
            ),
            (error): error is IdempotencyAdmin.InvalidTarget => error._tag === "InvalidTarget"
          ),
        list: (query) =>
          call(
            "list",
            api.list({
              urlParams: {
                ...(query?.state === undefined ? {} : { state: query.state }),
                ...(query?.operation === undefined ? {} : { operation: query.operation }),
                ...(query?.olderThan === undefined
                  ? {}
                  : { olderThanMillis: Duration.toMillis(Duration.decode(query.olderThan)) }),
                ...(query?.limit === undefined
                  ? {}
                  : { limit: Math.max(1, Math.min(1000, Math.floor(query.limit))) }),
                ...(query?.cursor === undefined ? {} : { cursor: query.cursor })
              }
            }).pipe(Effect.map((page) => ({ records: page.records.map(fromWire), cursor: page.cursor }))),
            none
          ),
        unblock: (target, unblockOptions) =>
          call(
            "unblock",
            api.unblock({
              payload: { ...targetOf(target), reason: unblockOptions.reason, attempt: unblockOptions.expect.attempt }
            }).pipe(
              // the endpoint logs the action where it runs; the caller's log gets the same line
              Effect.zipRight(
                Effect.logWarning(
                  "idempotency: a record was unblocked through the admin endpoint; the next attempt executes"
                )
              ),
              Effect.annotateLogs({
                "idempotency.operation": target.operation,
                "idempotency.key_hash": IdempotencyKey.hash(target.key),
                "idempotency.attempt": unblockOptions.expect.attempt,
                reason: unblockOptions.reason
              })
            ),
            (error): error is IdempotencyAdmin.UnblockRefused | IdempotencyAdmin.InvalidTarget =>
              error._tag === "UnblockRefused" || error._tag === "InvalidTarget"
          ),
        stats: call("stats", Effect.map(api.stats(), ({ counts }) => counts), none),
        purge: (purgeOptions) =>
          call(
            "purge",
            Effect.map(
              api.purge({ payload: purgeOptions?.limit === undefined ? {} : { limit: purgeOptions.limit } }),
              ({ purged }) => purged
            ),
            none
          )
      }
    })
  )
