/**
 * Idempotent HTTP functions on AWS Lambda, with `@effect-idempotency/http`'s semantics (README.md).
 *
 * @example
 * ```ts
 * import { IdempotencyStore } from "@effect-idempotency/core"
 * import { LambdaHttp } from "@effect-idempotency/lambda"
 * import { Effect } from "effect"
 *
 * // the store's layer: DynamoDB, PostgreSQL or Redis (the memory store refuses to start on Lambda)
 * const StoreLive = IdempotencyStore.layerMemory
 *
 * export const handler = LambdaHttp.idempotent({
 *   name: "create-order",
 *   layer: StoreLive,
 *   handler: (request) =>
 *     Effect.promise(() => request.json()).pipe(
 *       Effect.map((order) => Response.json({ orderId: crypto.randomUUID(), order }, { status: 201 }))
 *     )
 * })
 * ```
 *
 * @since 0.1.0
 */
import type { IdempotencyStore } from "@effect-idempotency/core"
import type { HttpIdempotency } from "@effect-idempotency/http"
import { IdempotentFetch } from "@effect-idempotency/http"
import type {
  APIGatewayProxyEvent,
  APIGatewayProxyEventV2,
  APIGatewayProxyResult,
  APIGatewayProxyStructuredResultV2
} from "aws-lambda"
import type * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type { LambdaContext } from "./LambdaInvocation.js"
import { MAX_DEFAULT_MARGIN } from "./LambdaInvocation.js"

/**
 * API Gateway REST (payload 1.0), or HTTP API and function URL (payload 2.0).
 *
 * @since 0.1.0
 * @category models
 */
export type HttpEvent = APIGatewayProxyEvent | APIGatewayProxyEventV2

/**
 * The result for the event's source (the same payload version as the event).
 *
 * @since 0.1.0
 * @category models
 */
export type HttpResult = APIGatewayProxyResult | APIGatewayProxyStructuredResultV2

/**
 * A Lambda handler of HTTP events; it resolves with problem responses too.
 *
 * @since 0.1.0
 * @category models
 */
export interface Handler {
  (event: HttpEvent, context: LambdaContext): Promise<HttpResult>
  readonly ready: () => Promise<void>
  readonly dispose: () => Promise<void>
}

/**
 * The options of an idempotent HTTP function.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<E, ROut, LE> extends HttpIdempotency.Options {
  readonly layer: Layer.Layer<ROut | IdempotencyStore.IdempotencyStore, LE>
  /** Keys of different scopes (a tenant, an authorizer's principal) never share a record. Default: the invocation's `tenantId`. */
  readonly scope?: ((request: Request, event: HttpEvent) => string | undefined) | undefined
  /** Default: 500 with a problem body that shows nothing of the error. */
  readonly onError?: ((error: E) => Response) | undefined
  readonly handler: (
    request: Request,
    event: HttpEvent
  ) => Effect.Effect<Response, E, NoInfer<ROut> | IdempotencyStore.IdempotencyStore>
}

const isV2 = (event: HttpEvent): event is APIGatewayProxyEventV2 =>
  (event as { readonly version?: unknown }).version === "2.0"

/**
 * The Web request of an event.
 *
 * @since 0.1.0
 * @category conversions
 */
export const toRequest = (event: HttpEvent): Request => {
  const headers = new Headers()
  for (const [name, value] of Object.entries(event.headers ?? {})) {
    if (value !== undefined) headers.set(name, value)
  }
  let method: string
  let url: string
  if (isV2(event)) {
    method = event.requestContext.http.method
    url = `https://${event.requestContext.domainName ?? "lambda"}${event.rawPath}${
      event.rawQueryString === "" ? "" : `?${event.rawQueryString}`
    }`
    if (event.cookies !== undefined && event.cookies.length > 0) headers.set("cookie", event.cookies.join("; "))
  } else {
    method = event.httpMethod
    for (const [name, values] of Object.entries(event.multiValueHeaders ?? {})) {
      if (values !== undefined && values.length > 1) headers.set(name, values.join(", "))
    }
    const query = new URLSearchParams()
    for (const [name, values] of Object.entries(event.multiValueQueryStringParameters ?? {})) {
      for (const value of values ?? []) query.append(name, value)
    }
    if (event.multiValueQueryStringParameters == null) {
      for (const [name, value] of Object.entries(event.queryStringParameters ?? {})) {
        if (value !== undefined) query.append(name, value)
      }
    }
    const search = query.toString()
    url = `https://${event.requestContext.domainName ?? "lambda"}${event.path}${search === "" ? "" : `?${search}`}`
  }
  const body = event.body == null || method === "GET" || method === "HEAD"
    ? undefined
    : event.isBase64Encoded
    ? Buffer.from(event.body, "base64")
    : event.body
  return new Request(url, { method, headers, ...(body === undefined ? {} : { body }) })
}

const TEXT = /^(text\/|application\/(json|xml|javascript|problem\+json|x-www-form-urlencoded)|[^;]*\+(json|xml))/i

/**
 * The result of a Web response (a body that is not text as base64).
 *
 * @since 0.1.0
 * @category conversions
 */
export const toResult = async (response: Response, event: HttpEvent): Promise<HttpResult> => {
  const bytes = new Uint8Array(await response.arrayBuffer())
  const type = response.headers.get("content-type") ?? ""
  const text = bytes.byteLength === 0 || TEXT.test(type)
  const body = text ? new TextDecoder().decode(bytes) : Buffer.from(bytes).toString("base64")
  const headers: Record<string, string> = {}
  response.headers.forEach((value, name) => {
    // `Connection` is hop-by-hop: a result has no connection
    if (name !== "set-cookie" && name !== "connection") headers[name] = value
  })
  const cookies = response.headers.getSetCookie()
  if (isV2(event)) {
    return {
      statusCode: response.status,
      headers,
      body,
      isBase64Encoded: !text,
      ...(cookies.length === 0 ? {} : { cookies })
    }
  }
  return {
    statusCode: response.status,
    headers,
    ...(cookies.length === 0 ? {} : { multiValueHeaders: { "set-cookie": cookies } }),
    body,
    isBase64Encoded: !text
  }
}

/**
 * An idempotent HTTP function.
 *
 * @since 0.1.0
 * @category constructors
 */
export const idempotent = <E, ROut, LE>(options: Options<E, ROut, LE>): Handler => {
  const scope = options.scope
  const fetchHandler = IdempotentFetch.make<
    { readonly event: HttpEvent; readonly context: LambdaContext; readonly remaining: number },
    void,
    E,
    ROut,
    LE
  >({
    ...options,
    margin: options.margin ?? MAX_DEFAULT_MARGIN,
    annotations: (_, context) => {
      const lambda = context as { readonly context?: LambdaContext } | undefined
      return lambda?.context === undefined ? {} : { requestId: lambda.context.awsRequestId }
    },
    // from when the request was received, so a cold start counts once
    cutOff: (incoming) =>
      incoming.context === undefined ? undefined : incoming.startedAt + Math.max(0, incoming.context.remaining),
    // See README.md#tenants: by default, the invocation's tenant
    scope: (_, incoming) =>
      incoming.context === undefined
        ? undefined
        : scope?.(incoming.request, incoming.context.event) ?? incoming.context.context.tenantId,
    handler: (_, incoming) => options.handler(incoming.request, incoming.context!.event)
  })
  const handler = (event: HttpEvent, context: LambdaContext): Promise<HttpResult> => {
    const remaining = context.getRemainingTimeInMillis()
    return fetchHandler(toRequest(event), { event, context, remaining }).then((response) => toResult(response, event))
  }
  return Object.assign(handler, { ready: fetchHandler.ready, dispose: fetchHandler.dispose })
}
