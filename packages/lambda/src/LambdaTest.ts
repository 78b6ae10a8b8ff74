/**
 * Runs a deployed function's handler in a test as Lambda would (README.md#testing-your-function).
 *
 * @example
 * ```ts
 * import { IdempotencyStore } from "@effect-idempotency/core"
 * import { LambdaSqs, LambdaTest } from "@effect-idempotency/lambda"
 * import { Effect, Schema } from "effect"
 *
 * const handler = LambdaSqs.batch({
 *   name: "charge",
 *   layer: IdempotencyStore.layerMemoryWith({ warn: false }),
 *   body: Schema.parseJson(Schema.Struct({ chargeId: Schema.String, cents: Schema.Int })),
 *   key: (body) => body.chargeId,
 *   handler: (body) => Effect.log(`charging ${body.cents} for ${body.chargeId}`)
 * })
 *
 * const program = Effect.gen(function*() {
 *   const event = LambdaTest.sqsEvent([
 *     LambdaTest.sqsRecord({ messageId: "m-1", body: JSON.stringify({ chargeId: "c-1", cents: 100 }) }),
 *     LambdaTest.sqsRecord({ messageId: "m-2", body: "not json" })
 *   ])
 *   const response = yield* LambdaTest.invoke(handler, event, { remaining: "10 seconds" })
 *   console.log(response.batchItemFailures) // [ { itemIdentifier: "m-2" } ]
 * }).pipe(Effect.ensuring(Effect.promise(() => handler.dispose())))
 *
 * Effect.runPromise(program)
 * ```
 *
 * @since 0.1.0
 */
import type {
  APIGatewayProxyEvent,
  APIGatewayProxyEventV2,
  Context,
  SQSEvent,
  SQSRecord,
  SQSRecordAttributes
} from "aws-lambda"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { createHash, randomUUID } from "node:crypto"

const REGION = "us-east-1"
const ACCOUNT = "123456789012"

// Lambda's clock, whatever `Clock` the caller provides
const wallClock = Clock.make()

/**
 * Lambda's default function timeout.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_TIMEOUT: Duration.Duration = Duration.seconds(3)

/**
 * An SQS message as Lambda delivers it.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqsRecordOptions {
  readonly messageId: string
  readonly body: string
  /** `attributes.ApproximateReceiveCount`. Default 1. */
  readonly receiveCount?: number | undefined
  readonly attributes?: Partial<SQSRecordAttributes> | undefined
  readonly messageAttributes?: SQSRecord["messageAttributes"] | undefined
  readonly eventSourceARN?: string | undefined
}

/**
 * An SQS record of a message, as Lambda delivers it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sqsRecord = (options: SqsRecordOptions): SQSRecord => {
  const receiveCount = options.receiveCount ?? 1
  const sentAt = String(wallClock.unsafeCurrentTimeMillis())
  return {
    messageId: options.messageId,
    receiptHandle: `receipt-${options.messageId}-${receiveCount}`,
    body: options.body,
    attributes: {
      ApproximateReceiveCount: String(receiveCount),
      SentTimestamp: sentAt,
      SenderId: "AIDAEXAMPLE",
      ApproximateFirstReceiveTimestamp: sentAt,
      ...options.attributes
    },
    messageAttributes: options.messageAttributes ?? {},
    md5OfBody: createHash("md5").update(options.body).digest("hex"),
    eventSource: "aws:sqs",
    eventSourceARN: options.eventSourceARN ?? `arn:aws:sqs:${REGION}:${ACCOUNT}:test-queue`,
    awsRegion: REGION
  }
}

/**
 * An SQS event: a batch of records, as the event source mapping hands it to the function.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sqsEvent = (records: ReadonlyArray<SQSRecord>): SQSEvent => ({ Records: [...records] })

/**
 * A request, for `restApiEvent` and `httpApiEvent`.
 *
 * @since 0.1.0
 * @category models
 */
export interface HttpEventOptions {
  readonly method?: string | undefined
  /** With its query string if any: `"/orders?source=web"`. */
  readonly path: string
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** Bytes are sent base64-encoded, as API Gateway sends a binary body. */
  readonly body?: string | Uint8Array | undefined
  readonly cookies?: ReadonlyArray<string> | undefined
  /** REST's `resource`, in HTTP API's `routeKey`: `"/orders/{id}"`. Default: the path. */
  readonly route?: string | undefined
  readonly pathParameters?: Readonly<Record<string, string>> | undefined
  readonly domainName?: string | undefined
}

const parts = (options: HttpEventOptions) => {
  const method = (options.method ?? "GET").toUpperCase()
  const at = options.path.indexOf("?")
  const path = at === -1 ? options.path : options.path.slice(0, at)
  const rawQuery = at === -1 ? "" : options.path.slice(at + 1)
  const query = new Map<string, Array<string>>()
  for (const [name, value] of new URLSearchParams(rawQuery)) {
    query.set(name, [...(query.get(name) ?? []), value])
  }
  const body = options.body === undefined
    ? undefined
    : typeof options.body === "string"
    ? { text: options.body, isBase64Encoded: false }
    : { text: Buffer.from(options.body).toString("base64"), isBase64Encoded: true }
  const now = wallClock.unsafeCurrentTimeMillis()
  return {
    method,
    path,
    rawQuery,
    query,
    body,
    route: options.route ?? path,
    domainName: options.domainName ?? "api.example.com",
    pathParameters: options.pathParameters === undefined ? undefined : { ...options.pathParameters },
    requestId: randomUUID(),
    now,
    userAgent: Object.entries(options.headers ?? {}).find(([name]) => name.toLowerCase() === "user-agent")?.[1]
  }
}

/** API Gateway's request time: `14/Nov/2023:22:13:20 +0000`. */
const requestTime = (millis: number): string => {
  const [, day, month, year, time] = new Date(millis).toUTCString().split(" ")
  return `${day}/${month}/${year}:${time} +0000`
}

/**
 * An API Gateway REST API event (payload 1.0) of a request.
 *
 * @since 0.1.0
 * @category constructors
 */
export const restApiEvent = (options: HttpEventOptions): APIGatewayProxyEvent => {
  const request = parts(options)
  const headers: Record<string, string> = { ...options.headers }
  if (options.cookies !== undefined && options.cookies.length > 0) {
    const name = Object.keys(headers).find((name) => name.toLowerCase() === "cookie") ?? "Cookie"
    headers[name] = [headers[name], ...options.cookies].filter((cookie) => cookie !== undefined).join("; ")
  }
  const multiValueHeaders: Record<string, Array<string>> = {}
  for (const [name, value] of Object.entries(headers)) multiValueHeaders[name] = [value]
  return {
    resource: request.route,
    path: request.path,
    httpMethod: request.method,
    headers,
    multiValueHeaders,
    queryStringParameters: request.query.size === 0
      ? null
      : Object.fromEntries(Array.from(request.query, ([name, values]) => [name, values[values.length - 1]!])),
    multiValueQueryStringParameters: request.query.size === 0 ? null : Object.fromEntries(request.query),
    pathParameters: request.pathParameters ?? null,
    stageVariables: null,
    requestContext: {
      accountId: ACCOUNT,
      apiId: "api",
      authorizer: null,
      domainName: request.domainName,
      domainPrefix: request.domainName.split(".")[0]!,
      httpMethod: request.method,
      identity: {
        accessKey: null,
        accountId: null,
        apiKey: null,
        apiKeyId: null,
        caller: null,
        clientCert: null,
        cognitoAuthenticationProvider: null,
        cognitoAuthenticationType: null,
        cognitoIdentityId: null,
        cognitoIdentityPoolId: null,
        principalOrgId: null,
        sourceIp: "127.0.0.1",
        user: null,
        userAgent: request.userAgent ?? null,
        userArn: null
      },
      path: `/test${request.path}`,
      protocol: "HTTP/1.1",
      requestId: request.requestId,
      requestTime: requestTime(request.now),
      requestTimeEpoch: request.now,
      resourceId: "resource",
      resourcePath: request.route,
      stage: "test"
    },
    body: request.body?.text ?? null,
    isBase64Encoded: request.body?.isBase64Encoded ?? false
  }
}

/**
 * An API Gateway HTTP API event (payload 2.0, as a function URL sends it) of a request.
 *
 * @since 0.1.0
 * @category constructors
 */
export const httpApiEvent = (options: HttpEventOptions): APIGatewayProxyEventV2 => {
  const request = parts(options)
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(options.headers ?? {})) {
    const key = name.toLowerCase()
    headers[key] = headers[key] === undefined ? value : `${headers[key]},${value}`
  }
  const routeKey = `${request.method} ${request.route}`
  return {
    version: "2.0",
    routeKey,
    rawPath: request.path,
    rawQueryString: request.rawQuery,
    ...(options.cookies === undefined || options.cookies.length === 0 ? {} : { cookies: [...options.cookies] }),
    headers,
    ...(request.query.size === 0
      ? {}
      : { queryStringParameters: Object.fromEntries(Array.from(request.query, ([name, v]) => [name, v.join(",")])) }),
    ...(request.pathParameters === undefined ? {} : { pathParameters: request.pathParameters }),
    requestContext: {
      accountId: ACCOUNT,
      apiId: "api",
      domainName: request.domainName,
      domainPrefix: request.domainName.split(".")[0]!,
      http: {
        method: request.method,
        path: request.path,
        protocol: "HTTP/1.1",
        sourceIp: "127.0.0.1",
        userAgent: request.userAgent ?? ""
      },
      requestId: request.requestId,
      routeKey,
      stage: "$default",
      time: requestTime(request.now),
      timeEpoch: request.now
    },
    ...(request.body === undefined ? {} : { body: request.body.text }),
    isBase64Encoded: request.body?.isBase64Encoded ?? false
  }
}

/**
 * An invocation's context.
 *
 * @since 0.1.0
 * @category models
 */
export interface ContextOptions {
  /** The time the invocation has left now. */
  readonly remaining: Duration.DurationInput
  readonly functionName?: string | undefined
  readonly awsRequestId?: string | undefined
  /** The invocation's tenant (Lambda's tenant isolation mode). */
  readonly tenantId?: string | undefined
}

/**
 * A Lambda context whose `getRemainingTimeInMillis()` runs down from `remaining` on the wall clock.
 *
 * @since 0.1.0
 * @category constructors
 */
export const context = (options: ContextOptions): Context => {
  const functionName = options.functionName ?? "test-function"
  const awsRequestId = options.awsRequestId ?? randomUUID()
  const deadline = wallClock.unsafeCurrentTimeMillis() + Math.round(Duration.toMillis(options.remaining))
  const ignored = () => {}
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName,
    functionVersion: "$LATEST",
    invokedFunctionArn: `arn:aws:lambda:${REGION}:${ACCOUNT}:function:${functionName}`,
    memoryLimitInMB: "128",
    awsRequestId,
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: `[$LATEST]${awsRequestId.replace(/-/g, "")}`,
    ...(options.tenantId === undefined ? {} : { tenantId: options.tenantId }),
    getRemainingTimeInMillis: () => Math.max(0, deadline - wallClock.unsafeCurrentTimeMillis()),
    done: ignored,
    fail: ignored,
    succeed: ignored
  }
}

/**
 * The handler rejected the invocation (or threw) with `cause`.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvocationFailed extends Schema.TaggedError<InvocationFailed>(
  "@effect-idempotency/lambda/InvocationFailed"
)("InvocationFailed", { cause: Schema.Defect }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The invocation failed: ${this.cause instanceof Error ? this.cause.message : String(this.cause)}`
  }
}

/**
 * The handler did not answer within the function's timeout.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvocationTimedOut extends Schema.TaggedError<InvocationTimedOut>(
  "@effect-idempotency/lambda/InvocationTimedOut"
)("InvocationTimedOut", { timeoutMillis: Schema.Number }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The invocation did not end within the function's timeout of ${this.timeoutMillis} ms`
  }
}

/**
 * An invocation.
 *
 * @since 0.1.0
 * @category models
 */
export interface InvokeOptions {
  /** The function's timeout. Default `DEFAULT_TIMEOUT`. */
  readonly remaining?: Duration.DurationInput | undefined
  readonly functionName?: string | undefined
  readonly awsRequestId?: string | undefined
  readonly tenantId?: string | undefined
}

/**
 * Invokes a handler `(event, context) => Promise<Result>` as Lambda does, with a fresh `context`.
 *
 * @since 0.1.0
 * @category utils
 */
export const invoke = <Event, Result>(
  handler: (event: Event, context: Context) => PromiseLike<Result>,
  event: NoInfer<Event>,
  options?: InvokeOptions
): Effect.Effect<Result, InvocationFailed | InvocationTimedOut> =>
  Effect.suspend(() => {
    const remaining = Duration.decode(options?.remaining ?? DEFAULT_TIMEOUT)
    const lambdaContext = context({ ...options, remaining })
    return Effect.tryPromise({
      try: () => handler(event, lambdaContext),
      catch: (cause) => new InvocationFailed({ cause })
    }).pipe(
      Effect.timeoutFail({
        duration: remaining,
        onTimeout: () => new InvocationTimedOut({ timeoutMillis: Duration.toMillis(remaining) })
      }),
      Effect.withClock(wallClock)
    )
  })
