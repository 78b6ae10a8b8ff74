/**
 * DynamoDB: the `DynamoDbStore` against Powertools' `makeIdempotent` with its
 * `DynamoDBPersistenceLayer`, and against a bare client that sends the same two requests (a
 * conditional `PutItem`, then an `UpdateItem`): the floor of any store outside the downstream.
 * Each contender has its own client (same configuration) and its own table on the same endpoint;
 * an SDK middleware on each client counts the requests it sends.
 */
import { IdempotencyConfig } from "@aws-lambda-powertools/idempotency"
import { DynamoDBPersistenceLayer } from "@aws-lambda-powertools/idempotency/dynamodb"
import type {
  AttributeValue,
  DynamoDBClientConfig,
  PutItemCommandInput,
  UpdateItemCommandInput
} from "@aws-sdk/client-dynamodb"
import {
  ConditionalCheckFailedException,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand
} from "@aws-sdk/client-dynamodb"
import { Idempotency, IdempotencyStore } from "@effect-idempotency/core"
import { DynamoDbClient, DynamoDbStore, DynamoDbTable } from "@effect-idempotency/dynamodb"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Runtime from "effect/Runtime"
import { randomUUID } from "node:crypto"
import { scriptedStore, succeed } from "../../packages/dynamodb/test/utils/scripted.js"
import * as Baseline from "./Baseline.js"
import { Conflict, FINGERPRINT, LEASE_MILLIS, TTL_MILLIS, TTL_SECONDS } from "./Baseline.js"
import { BenchError } from "./Measure.js"
import type { Contender, Plan, SuiteResult } from "./Suite.js"
import * as Suite from "./Suite.js"
import { Downstream, Payload, payloadFor, Receipt } from "./Workload.js"

/** The contenders' names, as they appear in keys, results and tables. */
export const OURS = "effect-idempotency"
export const OURS_CACHED = "effect-idempotency+cache"
export const OURS_TRACED = "effect-idempotency+tracer"
export const POWERTOOLS = "powertools"
export const BARE = "bare-client"
export const BARE_OURS = "bare-our-requests"
export const EFFECT_OURS = "effect-our-requests"

/** The same client configuration for every contender: loopback, one attempt, kept-alive sockets. */
const clientConfig = (endpoint: string): DynamoDBClientConfig => ({
  endpoint,
  region: "us-east-1",
  credentials: { accessKeyId: "local", secretAccessKey: "local" },
  maxAttempts: 1,
  requestHandler: { httpAgent: { keepAlive: true, maxSockets: 64 } }
})

/**
 * A contender's client of its own, destroyed with the scope, with a middleware that counts its
 * requests, and its table, created through the package's own helper.
 */
const countedClient = (endpoint: string, tableName: string) =>
  Effect.acquireRelease(
    Effect.sync(() => new DynamoDBClient(clientConfig(endpoint))),
    (client) => Effect.sync(() => client.destroy())
  ).pipe(
    Effect.map((client) => {
      const sent = { requests: 0 }
      client.middlewareStack.add(
        (next) => (args) => {
          sent.requests++
          return next(args)
        },
        { step: "deserialize", name: "benchRoundTrips" }
      )
      return { client, roundTrips: () => sent.requests }
    }),
    Effect.tap(({ client }) =>
      DynamoDbTable.create({ tableName }).pipe(
        Effect.provideService(DynamoDbClient.DynamoDbClient, DynamoDbClient.DynamoDbClient.of({ client })),
        Logger.withMinimumLogLevel(LogLevel.Error),
        Effect.mapError((cause) => new BenchError({ message: `table ${tableName} could not be created`, cause }))
      )
    )
  )

const ours = (endpoint: string, tableName: string, cached: boolean, traced = false) =>
  Effect.gen(function*() {
    const { client, roundTrips } = yield* countedClient(endpoint, tableName)
    const store = Layer.effect(
      IdempotencyStore.IdempotencyStore,
      Effect.flatMap(DynamoDbStore.make({ tableName }), (store) =>
        cached ? IdempotencyStore.makeCached(store) : Effect.succeed(store))
    ).pipe(Layer.provide(Layer.succeed(DynamoDbClient.DynamoDbClient, DynamoDbClient.DynamoDbClient.of({ client }))))
    const name = cached ? OURS_CACHED : traced ? OURS_TRACED : OURS
    return yield* Suite.effectContender(name, store, roundTrips, traced ? Suite.recordingTracer().tracer : undefined)
  })

/**
 * Powertools: the key is the event's `key` (hashed), the request is validated by a hash of its
 * `payload` (like our fingerprint), and records live 24 hours.
 */
const powertools = (endpoint: string, tableName: string) =>
  Effect.map(countedClient(endpoint, tableName), ({ client, roundTrips }) =>
    Baseline.powertools(
      POWERTOOLS,
      {
        persistenceStore: new DynamoDBPersistenceLayer({ tableName, awsSdkV3Client: client }),
        config: new IdempotencyConfig({
          eventKeyJmesPath: "key",
          payloadValidationJmesPath: "payload",
          expiresAfterSeconds: TTL_SECONDS
        }),
        keyPrefix: "charge"
      },
      roundTrips
    ))

const S = (value: string): AttributeValue => ({ S: value })
const N = (value: number): AttributeValue => ({ N: String(value) })

/** The key of the record of `key`, and its item as the store's reservation writes it (IN_PROGRESS, lease and expiry from `now`). */
const inProgress = (key: string, token: string, now: number) => {
  const Key = { id: S(`charge#${key}`) }
  const expiresAt = now + TTL_MILLIS
  const Item: Record<string, AttributeValue> = {
    ...Key,
    status: S("IN_PROGRESS"),
    token: S(token),
    fingerprint: S(FINGERPRINT),
    attempt: N(1),
    lease_until: N(now + LEASE_MILLIS),
    expires_at: N(expiresAt),
    ttl: N(Math.ceil(expiresAt / 1000))
  }
  return { Key, Item, expiresAt }
}

/** The outcome of a refused reservation's item, or `Conflict` when it is not a completed record of this payload. */
const replayed = (item: Record<string, AttributeValue> | undefined): unknown =>
  Baseline.replayed(
    item && { status: item.status?.S, fingerprint: item.fingerprint?.S, outcome: item.outcome_body?.S }
  )

/** The item of `Key`, read consistently: what a refused reservation found where the endpoint does not return it. */
const readItem = (
  client: DynamoDBClient,
  tableName: string,
  Key: Record<string, AttributeValue>,
  options?: { readonly abortSignal: AbortSignal }
) =>
  client.send(new GetItemCommand({ TableName: tableName, Key, ConsistentRead: true }), options).then((out) => out.Item)

/**
 * The floor: a conditional `PutItem` of an IN_PROGRESS item (absent key only; the existing item
 * comes back on failure, or, where the endpoint does not return it, one consistent `GetItem`
 * reads it), the downstream, then an `UpdateItem` to COMPLETED with the outcome. Items carry the
 * same attributes as the store's; the fingerprint is a constant (no hashing).
 */
const bare = (endpoint: string, tableName: string) =>
  Effect.map(
    countedClient(endpoint, tableName),
    ({ client, roundTrips }) =>
      Baseline.baseline(BARE, roundTrips, (downstream) => ({
        call: async (key) => {
          const { Item, Key, expiresAt } = inProgress(key, randomUUID(), Date.now())
          try {
            await client.send(
              new PutItemCommand({
                TableName: tableName,
                Item,
                ConditionExpression: "attribute_not_exists(#id)",
                ExpressionAttributeNames: { "#id": "id" },
                ReturnValuesOnConditionCheckFailure: "ALL_OLD"
              })
            )
          } catch (error) {
            if (!(error instanceof ConditionalCheckFailedException)) throw error
            return replayed(error.Item ?? await readItem(client, tableName, Key))
          }
          const receipt = await downstream.charge(payloadFor(key))
          await client.send(
            new UpdateItemCommand({
              TableName: tableName,
              Key,
              UpdateExpression: "SET #status = :status, outcome_kind = :kind, outcome_body = :body, " +
                "expires_at = :expires, #ttl = :ttl",
              ExpressionAttributeNames: { "#status": "status", "#ttl": "ttl" },
              ExpressionAttributeValues: {
                ":status": S("COMPLETED"),
                ":kind": S("Success"),
                ":body": S(JSON.stringify(receipt)),
                ":expires": N(expiresAt),
                ":ttl": N(Math.ceil(expiresAt / 1000))
              }
            })
          )
          return receipt
        }
      }))
  )

/**
 * The two requests of a first execution exactly as the store sends them (expressions, names,
 * constant values, return options): one call of the operation on a store whose client records its
 * requests instead of sending them. The parameters (`:now`, `:token`, …) are replaced per call.
 */
const ourRequests: Effect.Effect<
  { readonly reserve: PutItemCommandInput; readonly complete: UpdateItemCommandInput },
  BenchError
> = Effect.gen(function*() {
  const { sent, store } = yield* scriptedStore(succeed)
  const operation = Idempotency.make({
    name: "charge",
    payload: Payload,
    success: Receipt,
    execute: (payload) => Effect.succeed({ chargeId: `ch_${payload.customerId}`, amountCents: payload.amountCents })
  })
  yield* operation.run({ key: "captured", payload: payloadFor("captured") }).pipe(
    Effect.provideService(IdempotencyStore.IdempotencyStore, store),
    Effect.mapError((cause) => new BenchError({ message: "the store's requests could not be captured", cause }))
  )
  const [reserve, complete] = sent
  const params = (input: Readonly<Record<string, unknown>>, names: ReadonlyArray<string>) =>
    names.every((name) => Predicate.hasProperty(input.ExpressionAttributeValues, name))
  if (
    sent.length !== 2 || reserve?.command !== "PutItem" || complete?.command !== "UpdateItem" ||
    !params(reserve.input, [":now"]) ||
    !params(complete.input, [":now", ":token", ":kind", ":body", ":expiresAt", ":ttl"])
  ) {
    return yield* new BenchError({ message: "the store no longer sends the requests this baseline knows" })
  }
  return {
    reserve: reserve.input as unknown as PutItemCommandInput,
    complete: complete.input as unknown as UpdateItemCommandInput
  }
})

/** The store's two requests for one key, with this call's values in place of the captured ones. */
const ourInputs = (
  requests: { readonly reserve: PutItemCommandInput; readonly complete: UpdateItemCommandInput },
  tableName: string,
  key: string
) => {
  const now = Date.now()
  const token = randomUUID()
  const { Item, Key } = inProgress(key, token, now)
  const reserve: PutItemCommandInput = {
    ...requests.reserve,
    TableName: tableName,
    Item: { ...requests.reserve.Item, ...Item },
    ExpressionAttributeValues: { ...requests.reserve.ExpressionAttributeValues, ":now": N(now) }
  }
  const complete = (receipt: Receipt): UpdateItemCommandInput => {
    const completedAt = Date.now()
    const completedExpiry = completedAt + TTL_MILLIS
    return {
      ...requests.complete,
      TableName: tableName,
      Key,
      ExpressionAttributeValues: {
        ...requests.complete.ExpressionAttributeValues,
        ":now": N(completedAt),
        ":token": S(token),
        ":kind": S("Success"),
        ":body": S(JSON.stringify(receipt)),
        ":expiresAt": N(completedExpiry),
        ":ttl": N(Math.ceil(completedExpiry / 1000))
      }
    }
  }
  return { Key, reserve, complete }
}

/**
 * The store's exact requests with nothing around them: the reservation's conditional `PutItem`
 * (absent or expired, `ALL_OLD` on a failed condition) and the completion `UpdateItem` fenced by
 * the token, sent with the SDK client alone (no Effect, no abort signal, no hashing). Against ours
 * it measures what everything but the requests costs; against `bare-client`, what the store's
 * conditions and its fencing add to the plainest requests.
 */
const bareOurs = (endpoint: string, tableName: string) =>
  Effect.gen(function*() {
    const { client, roundTrips } = yield* countedClient(endpoint, tableName)
    const requests = yield* ourRequests
    return Baseline.baseline(BARE_OURS, roundTrips, (downstream) => ({
      call: async (key) => {
        const inputs = ourInputs(requests, tableName, key)
        try {
          await client.send(new PutItemCommand(inputs.reserve))
        } catch (error) {
          if (!(error instanceof ConditionalCheckFailedException)) throw error
          return replayed(error.Item ?? await readItem(client, tableName, inputs.Key))
        }
        const receipt = await downstream.charge(payloadFor(key))
        await client.send(new UpdateItemCommand(inputs.complete(receipt)))
        return receipt
      }
    }))
  })

/**
 * Effect's own floor on this work: the store's exact requests (as `bare-our-requests` sends them),
 * each an `Effect.tryPromise`, the downstream an effect, all in one `Effect.gen` run with one
 * `runPromise` per call on a runtime built once, as ours is run. Against `bare-our-requests` it
 * shows what running the same work as an Effect program costs; against it, ours shows what our
 * engine and store add above that floor.
 */
const effectOurs = (endpoint: string, tableName: string) =>
  Effect.gen(function*() {
    const { client, roundTrips } = yield* countedClient(endpoint, tableName)
    const downstream = new Downstream()
    const requests = yield* ourRequests
    const runtime = yield* Suite.scopedRuntime(Layer.empty)
    const send = <A>(request: (signal: AbortSignal) => Promise<A>) =>
      Effect.tryPromise({ try: request, catch: (error) => error })
    const program = (key: string) =>
      Effect.gen(function*() {
        const inputs = ourInputs(requests, tableName, key)
        const refused = yield* send((abortSignal) => client.send(new PutItemCommand(inputs.reserve), { abortSignal }))
          .pipe(
            Effect.as(undefined),
            Effect.catchIf(
              (error) => error instanceof ConditionalCheckFailedException,
              (error) => Effect.succeed(error as ConditionalCheckFailedException)
            )
          )
        if (refused !== undefined) {
          const item = refused.Item ??
            (yield* send((abortSignal) => readItem(client, tableName, inputs.Key, { abortSignal })))
          return yield* Effect.try({ try: () => replayed(item), catch: (error) => error })
        }
        const receipt = yield* Effect.promise(() => Promise.resolve(downstream.charge(payloadFor(key))))
        yield* send((abortSignal) => client.send(new UpdateItemCommand(inputs.complete(receipt)), { abortSignal }))
        return receipt
      })
    return {
      name: EFFECT_OURS,
      downstream,
      call: (key) => runtime.runPromise(program(key)),
      isConflict: (error) =>
        Runtime.isFiberFailure(error) &&
        Option.exists(
          Cause.failureOption(error[Runtime.FiberFailureCauseId]),
          (failure) => failure instanceof Conflict
        ),
      roundTrips
    } satisfies Contender
  })

/** A DynamoDB endpoint on loopback. */
export interface Endpoint {
  readonly name: "DynamoDB Local" | "dynalite"
  readonly url: string
}

/**
 * Runs the suite on an endpoint: ours, Powertools, the bare client and the bare client with our
 * requests, plus ours behind the warm cache when `cache` is set and ours with a tracer installed
 * when `tracer` is set.
 */
export const run = (
  endpoint: Endpoint,
  plan: Plan,
  options: { readonly cache: boolean; readonly tracer: boolean }
): Effect.Effect<SuiteResult, BenchError> =>
  Effect.scoped(Effect.gen(function*() {
    const table = (name: string) => `bench-${plan.runId}-${name.replaceAll(/[^A-Za-z0-9_.-]/g, "-")}`
    const contenders: Array<Contender> = [
      yield* ours(endpoint.url, table(OURS), false),
      yield* powertools(endpoint.url, table(POWERTOOLS)),
      yield* bare(endpoint.url, table(BARE)),
      yield* bareOurs(endpoint.url, table(BARE_OURS)),
      yield* effectOurs(endpoint.url, table(EFFECT_OURS))
    ]
    if (options.cache) contenders.push(yield* ours(endpoint.url, table(OURS_CACHED), true))
    if (options.tracer) contenders.push(yield* ours(endpoint.url, table(OURS_TRACED), false, true))
    return yield* Suite.run(plan, contenders)
  }))
