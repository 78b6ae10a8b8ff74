/**
 * Idempotent endpoints for `@effect/platform`'s `HttpApi`: an endpoint opts in with `idempotent()`,
 * and `layer(api)` runs it (README.md#an-httpapi-endpoint).
 *
 * @example
 * ```ts
 * import { IdempotencyHttpApi } from "@effect-idempotency/platform"
 * import { IdempotencyStore } from "@effect-idempotency/core"
 * import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
 * import { Effect, Layer, Schema } from "effect"
 *
 * const NewOrder = Schema.Struct({ sku: Schema.String, quantity: Schema.Int })
 * const Order = Schema.Struct({ id: Schema.String, sku: Schema.String, quantity: Schema.Int })
 * const OrderPath = Schema.Struct({ id: Schema.String })
 * class OutOfStock extends Schema.TaggedError<OutOfStock>()("OutOfStock", { sku: Schema.String }) {}
 *
 * class OrdersApi extends HttpApiGroup.make("orders")
 *   .add(HttpApiEndpoint.post("create", "/orders").setPayload(NewOrder).addSuccess(Order, { status: 201 })
 *     .addError(OutOfStock).pipe(IdempotencyHttpApi.idempotent()))
 *   .add(HttpApiEndpoint.get("get", "/orders/:id").setPath(OrderPath).addSuccess(Order))
 * {}
 * class Api extends HttpApi.make("shop").add(OrdersApi) {}
 *
 * const OrdersLive = HttpApiBuilder.group(Api, "orders", (handlers) =>
 *   handlers
 *     .handle("create", ({ payload }) => Effect.succeed({ id: "order-1", ...payload }))
 *     .handle("get", ({ path }) => Effect.succeed({ id: path.id, sku: "A-1", quantity: 1 })))
 * // the store's layer: PostgreSQL, DynamoDB, Redis, or memory in development
 * const StoreLive = IdempotencyStore.layerMemory
 *
 * const ApiLive = HttpApiBuilder.api(Api).pipe(
 *   Layer.provide(OrdersLive),
 *   Layer.provide(IdempotencyHttpApi.layer(Api)),
 *   Layer.provide(StoreLive)
 * )
 * ```
 *
 * @since 0.1.0
 */
import type { IdempotencyStore } from "@effect-idempotency/core"
import { HttpIdempotency, HttpIdempotencyError } from "@effect-idempotency/http"
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import type * as HttpApp from "@effect/platform/HttpApp"
import type * as HttpMethod from "@effect/platform/HttpMethod"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FiberRef from "effect/FiberRef"
import { dual } from "effect/Function"
import { globalValue } from "effect/GlobalValue"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as FindMyWay from "find-my-way-ts"
import * as internalOperation from "./internal/operation.js"
import * as internal from "./internal/protect.js"

const problem = <const Status extends number>(status: Status, description: string) =>
  Schema.Struct({
    type: Schema.String,
    title: Schema.String,
    status: Schema.Literal(status),
    detail: Schema.String
  }).pipe(
    HttpApiSchema.withEncoding({ kind: "Json", contentType: "application/problem+json" })
  ).annotations(
    HttpApiSchema.annotations({ identifier: `IdempotencyProblem${status}`, description, status })
  )

/**
 * The problem responses an idempotent endpoint may answer with, as its OpenAPI document shows them.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Problems = Schema.Union(
  problem(400, "The Idempotency-Key header is missing or not a valid key"),
  problem(409, "A request with this Idempotency-Key is still in progress (see Retry-After)"),
  problem(413, "The request body is larger than the endpoint accepts"),
  problem(422, "The Idempotency-Key was already used with another request"),
  problem(500, "The request was processed, but its response cannot be replayed"),
  problem(503, "The idempotency store is unavailable: the request was not processed"),
  problem(504, "The request's outcome is unknown: it did not finish in time")
)

/**
 * The middleware an idempotent endpoint declares; `layer` provides it.
 *
 * @since 0.1.0
 * @category middleware
 */
export class Idempotent extends HttpApiMiddleware.Tag<Idempotent>()(
  "@effect-idempotency/platform/IdempotencyHttpApi/Idempotent",
  { failure: Problems }
) {}

/**
 * The options of one endpoint (or of a group, as an annotation): those of the protocol (`HttpIdempotency.Options`). The records'
 * namespace defaults to `<group>.<endpoint>`.
 *
 * @since 0.1.0
 * @category models
 */
export interface EndpointOptions extends HttpIdempotency.Options {}

/**
 * The annotation that holds an endpoint's options.
 *
 * @since 0.1.0
 * @category annotations
 */
export class Settings extends Context.Tag("@effect-idempotency/platform/IdempotencyHttpApi/Settings")<
  Settings,
  EndpointOptions
>() {}

const replayedHeader = {
  description: "`true` when this is the recorded response of an earlier request with the same Idempotency-Key",
  schema: { type: "string", enum: ["true"] }
}

const retryAfterHeader = {
  description: "Seconds until the request in progress with the same Idempotency-Key may have finished",
  schema: { type: "integer", minimum: 0 }
}

type Json = Record<string, unknown>

const asRecord = (u: unknown): Json => typeof u === "object" && u !== null ? u as Json : {}

const documentHeaders = (options: EndpointOptions | undefined) => (operation: Json): Json => {
  const header = options?.header ?? HttpIdempotency.HEADER
  const parameters = Array.isArray(operation.parameters) ? operation.parameters.map(asRecord) : []
  if (!parameters.some((p) => p.in === "header" && String(p.name).toLowerCase() === header.toLowerCase())) {
    parameters.push({
      name: header,
      in: "header",
      required: options?.required ?? true,
      description: "A unique key per request (a UUID): a retry with the same key gets the recorded response. " +
        "An sf-string (\"…\") or the bare key; 1 to 255 printable ASCII characters without spaces, \", \\ or #.",
      schema: { type: "string", minLength: 1 }
    })
  }
  const responses: Json = {}
  for (const [status, value] of Object.entries(asRecord(operation.responses))) {
    const response = asRecord(value)
    responses[status] = {
      ...response,
      headers: {
        ...asRecord(response.headers),
        "Idempotent-Replayed": replayedHeader,
        ...(status === "409" ? { "Retry-After": retryAfterHeader } : {})
      }
    }
  }
  return { ...operation, parameters, responses }
}

/** An endpoint made idempotent: the `Idempotent` middleware's error and requirement added to its own. */
type IdempotentEndpoint<N extends string, M extends HttpMethod.HttpMethod, P, U, B, H, S, E, R, RE> =
  HttpApiEndpoint.HttpApiEndpoint<
    N,
    M,
    P,
    U,
    B,
    H,
    S,
    E | HttpApiMiddleware.HttpApiMiddleware.Error<Idempotent>,
    R | Idempotent,
    RE
  >

/**
 * Makes an endpoint idempotent: the `Idempotent` middleware, its options, and the headers in its
 * OpenAPI operation.
 *
 * @since 0.1.0
 * @category combinators
 */
export const idempotent: {
  (options?: EndpointOptions): <
    Name extends string,
    Method extends HttpMethod.HttpMethod,
    Path,
    UrlParams,
    Payload,
    Headers,
    Success,
    Error,
    R,
    RE
  >(
    self: HttpApiEndpoint.HttpApiEndpoint<Name, Method, Path, UrlParams, Payload, Headers, Success, Error, R, RE>
  ) => IdempotentEndpoint<Name, Method, Path, UrlParams, Payload, Headers, Success, Error, R, RE>
  <Name extends string, Method extends HttpMethod.HttpMethod, Path, UrlParams, Payload, Headers, Success, Error, R, RE>(
    self: HttpApiEndpoint.HttpApiEndpoint<Name, Method, Path, UrlParams, Payload, Headers, Success, Error, R, RE>,
    options?: EndpointOptions
  ): IdempotentEndpoint<Name, Method, Path, UrlParams, Payload, Headers, Success, Error, R, RE>
} = dual(
  (args) => args.length > 0 && typeof args[0] === "object" && args[0] !== null && "middleware" in args[0],
  <Name extends string, Method extends HttpMethod.HttpMethod, Path, UrlParams, Payload, Headers, Success, Error, R, RE>(
    self: HttpApiEndpoint.HttpApiEndpoint<Name, Method, Path, UrlParams, Payload, Headers, Success, Error, R, RE>,
    options?: EndpointOptions
  ) => {
    const existing = Context.getOption(self.annotations, OpenApi.Transform)
    const document = documentHeaders(options)
    const transform = Option.match(existing, {
      onNone: () => document,
      onSome: (previous) => (operation: Json) => document(previous(operation))
    })
    const annotated = self.middleware(Idempotent).annotate(OpenApi.Transform, transform)
    return options === undefined ? annotated : annotated.annotate(Settings, options)
  }
)

/**
 * The defaults of every idempotent endpoint (an endpoint's own options override them), and the scope.
 *
 * @since 0.1.0
 * @category models
 */
export interface LayerOptions<E, R> extends Omit<HttpIdempotency.Options, "name" | "required" | "header"> {
  readonly scope?:
    | ((request: HttpServerRequest.HttpServerRequest) => Effect.Effect<string | undefined, E, R>)
    | undefined
}

/** Whether the current request went through this module's app middleware. */
const guarded = globalValue(
  Symbol.for("@effect-idempotency/platform/IdempotencyHttpApi/guarded"),
  () => FiberRef.unsafeMake(false)
)

/** An opted-in route that the app middleware did not protect fails closed, without running. */
const gate: Effect.Effect<void> = Effect.flatMap(
  FiberRef.get(guarded),
  (isGuarded) =>
    isGuarded ? Effect.void : Effect.dieMessage(
      "an idempotent endpoint was reached without IdempotencyHttpApi's middleware: it was not run"
    )
)

interface ErrorEncoding {
  readonly is: (u: unknown) => boolean
  readonly encode: (u: unknown) => Effect.Effect<unknown, unknown>
  readonly status: number
  readonly encoding: HttpApiSchema.Encoding
  readonly isVoid: boolean
}

const errorEncodings = (schemas: ReadonlyArray<Schema.Schema.Any>): ReadonlyArray<ErrorEncoding> => {
  const members = new Set<Schema.Schema.Any>()
  for (const schema of schemas) HttpApiSchema.deunionize(members, schema)
  return Array.from(members, (schema) => {
    const noContext = schema as Schema.Schema<unknown, unknown>
    return {
      is: Schema.is(noContext),
      encode: Schema.encodeUnknown(noContext),
      status: HttpApiSchema.getStatusErrorAST(schema.ast),
      encoding: HttpApiSchema.getEncoding(schema.ast),
      isVoid: HttpApiSchema.isVoid(schema.ast)
    }
  })
}

const encodeFailure =
  (encodings: ReadonlyArray<ErrorEncoding>) =>
  (error: unknown): Effect.Effect<Option.Option<HttpServerResponse.HttpServerResponse>> => {
    const found = encodings.find((encoding) => encoding.is(error))
    if (found === undefined) return Effect.succeedNone
    const options = { status: found.status, contentType: found.encoding.contentType }
    return found.encode(error).pipe(
      Effect.flatMap((encoded): Effect.Effect<HttpServerResponse.HttpServerResponse, unknown> => {
        if (found.isVoid) return Effect.succeed(HttpServerResponse.empty({ status: found.status }))
        switch (found.encoding.kind) {
          case "Json":
            return HttpServerResponse.json(encoded, options)
          case "Text":
            return Effect.succeed(HttpServerResponse.text(encoded as string, options))
          case "Uint8Array":
            return Effect.succeed(HttpServerResponse.uint8Array(encoded as Uint8Array, options))
          case "UrlParams":
            return Effect.succeed(HttpServerResponse.urlParams(encoded as never, options))
        }
      }),
      Effect.option
    )
  }

interface Route {
  readonly protocol: HttpIdempotency.HttpIdempotency
  readonly errors: ReadonlyArray<ErrorEncoding>
  readonly payload:
    | ((request: HttpServerRequest.HttpServerRequest, bytes: Uint8Array) => Effect.Effect<
      Option.Option<unknown>,
      HttpIdempotencyError.InvalidRequestBody
    >)
    | undefined
}

const textDecoder = new TextDecoder()

const isJson = (request: HttpServerRequest.HttpServerRequest): boolean => {
  const type = request.headers["content-type"]
  return type === undefined || type.toLowerCase().includes("json")
}

/** See README.md#an-httpapi-endpoint: the fingerprint of a JSON payload. */
const payloadOf = (schema: Schema.Schema.Any) => {
  const noContext = schema as Schema.Schema<unknown, unknown>
  const decode = Schema.decodeUnknownEither(noContext)
  const encode = Schema.encodeEither(noContext)
  return (
    request: HttpServerRequest.HttpServerRequest,
    bytes: Uint8Array
  ): Effect.Effect<Option.Option<unknown>, HttpIdempotencyError.InvalidRequestBody> => {
    if (!isJson(request)) return Effect.succeedNone
    let json: unknown
    try {
      json = JSON.parse(textDecoder.decode(bytes))
    } catch {
      return Effect.succeedNone
    }
    try {
      const decoded = decode(json)
      if (Either.isLeft(decoded)) {
        // a body whose formatting crashes would crash `HttpApiBuilder`, after the reservation
        ParseResult.ArrayFormatter.formatErrorSync(decoded.left)
        ParseResult.TreeFormatter.formatErrorSync(decoded.left)
        return Effect.succeedNone
      }
      return Effect.succeed(Either.getRight(encode(decoded.right)))
    } catch (error) {
      // a stack overflow is the body's doing; anything else is left to `HttpApiBuilder`
      return error instanceof RangeError
        ? Effect.fail(
          new HttpIdempotencyError.InvalidRequestBody({ reason: "Schema", detail: "the body cannot be decoded" })
        )
        : Effect.succeedNone
    }
  }
}

const nameOf = (
  group: { readonly identifier: string },
  endpoint: { readonly name: string },
  settings: EndpointOptions | undefined
): string => settings?.name ?? `${group.identifier}.${endpoint.name}`

/**
 * Runs the idempotent endpoints of an api; each endpoint's protocol is built here, once.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = <Id extends string, Groups extends HttpApiGroup.HttpApiGroup.Any, Error, ErrorR, R = never>(
  api: HttpApi.HttpApi<Id, Groups, Error, ErrorR>,
  options?: LayerOptions<NoInfer<Error>, R>
): Layer.Layer<Idempotent, never, IdempotencyStore.IdempotencyStore | Exclude<R, HttpRouter.HttpRouter.Provided>> => {
  const scope = options?.scope
  const build = Effect.map(FiberRef.get(HttpRouter.currentRouterConfig), (config) => {
    const routes = FindMyWay.make<Route | undefined>(config)
    const idempotentRoutes: Array<Route> = []
    const methods = new Set<string>()
    const self = api as unknown as HttpApi.HttpApi.AnyWithProps
    HttpApi.reflect(api, {
      onGroup() {},
      onEndpoint({ endpoint, group, mergedAnnotations, middleware }) {
        if (!(middleware as ReadonlySet<unknown>).has(Idempotent)) {
          routes.on(endpoint.method, endpoint.path, undefined)
          return
        }
        const settings = Option.getOrUndefined(Context.getOption(mergedAnnotations, Settings))
        const protocol = HttpIdempotency.make({ ...options, ...settings, name: nameOf(group, endpoint, settings) })
        for (const method of settings?.methods ?? options?.methods ?? HttpIdempotency.DEFAULT_METHODS) {
          methods.add(method.toUpperCase())
        }
        const payloadSchema = endpoint.payloadSchema as unknown as Option.Option<Schema.Schema.Any>
        const route: Route = {
          protocol,
          errors: errorEncodings(
            [self.errorSchema, group.errorSchema, endpoint.errorSchema] as unknown as ReadonlyArray<Schema.Schema.Any>
          ),
          payload: Option.isSome(payloadSchema) && HttpApiSchema.getEncoding(payloadSchema.value.ast).kind === "Json"
            ? payloadOf(payloadSchema.value)
            : undefined
        }
        idempotentRoutes.push(route)
        routes.on(endpoint.method, endpoint.path, route)
      }
    })
    return (app: HttpApp.Default): HttpApp.Default<Error, R | IdempotencyStore.IdempotencyStore> => {
      const untouched = Effect.locally(app, guarded, true)
      const protectedApps = new Map(
        idempotentRoutes.map((route) => [
          route,
          internal.protect<never, never, Error, R>(route.protocol, untouched, {
            scope,
            payload: route.payload,
            encodeFailure: encodeFailure(route.errors)
          })
        ])
      )
      return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
        if (!methods.has(request.method)) return untouched
        const route = routes.find(request.method, request.url)?.handler
        return route === undefined ? app : protectedApps.get(route)!
      })
    }
  })
  return Layer.merge(
    Layer.succeed(Idempotent, gate),
    HttpApiBuilder.middleware(api, build, { withContext: true })
  ) as Layer.Layer<Idempotent, never, IdempotencyStore.IdempotencyStore | Exclude<R, HttpRouter.HttpRouter.Provided>>
}

/**
 * The operation of an idempotent endpoint for `RetryProperty`, run through the api's app as served
 * (README.md#property-test-the-route-you-deploy).
 *
 * @since 0.1.0
 * @category constructors
 */
export const operation = <
  Id extends string,
  Groups extends HttpApiGroup.HttpApiGroup.Any,
  Error,
  ErrorR,
  const GroupName extends HttpApiGroup.HttpApiGroup.Name<Groups>,
  const Name extends HttpApiEndpoint.HttpApiEndpoint.Name<
    HttpApiGroup.HttpApiGroup.EndpointsWithName<Groups, GroupName>
  >
>(
  api: HttpApi.HttpApi<Id, Groups, Error, ErrorR>,
  group: GroupName,
  endpoint: Name
): HttpIdempotency.Operation<
  never,
  HttpApi.Api | HttpApiBuilder.Router | HttpApiBuilder.Middleware | HttpRouter.HttpRouter.DefaultServices
> => {
  let found: { readonly name: string; readonly route: Parameters<typeof internalOperation.make>[2] } | undefined
  HttpApi.reflect(api, {
    onGroup() {},
    onEndpoint({ endpoint: candidate, group: candidateGroup, mergedAnnotations, middleware }) {
      if (candidateGroup.identifier !== group || candidate.name !== endpoint) return
      if (!(middleware as ReadonlySet<unknown>).has(Idempotent)) return
      const settings = Option.getOrUndefined(Context.getOption(mergedAnnotations, Settings))
      found = {
        name: nameOf(candidateGroup, candidate, settings),
        route: { header: settings?.header, method: candidate.method, path: candidate.path }
      }
    }
  })
  if (found === undefined) {
    const message = `${group}.${endpoint} is not an idempotent endpoint of the api`
    return { name: `${group}.${endpoint}`, runDetailed: () => Effect.dieMessage(message) }
  }
  const { name, route } = found
  return {
    name,
    runDetailed: (request) =>
      Effect.flatMap(HttpApiBuilder.httpApp, (app) => internalOperation.make(name, app, route).runDetailed(request))
  }
}
