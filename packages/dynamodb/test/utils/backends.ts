/**
 * The DynamoDB endpoints started by the global setup, and layers over them.
 */
import type { DynamoDBClientConfig } from "@aws-sdk/client-dynamodb"
import { DynamoDbClient, DynamoDbStore, DynamoDbTable } from "@effect-idempotency/dynamodb"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as TestServices from "effect/TestServices"
import { randomUUID } from "node:crypto"
import { inject } from "vitest"

/** An endpoint the tests run against. */
export interface Backend {
  readonly name: "DynamoDB Local" | "dynalite"
  readonly endpoint: string
  /** Whether a failed condition returns the existing item (`ReturnValuesOnConditionCheckFailure`). */
  readonly returnsItemOnConditionFailure: boolean
  /** Whether the endpoint has the TTL API (`UpdateTimeToLive`). */
  readonly timeToLiveApi: boolean
}

declare module "vitest" {
  export interface ProvidedContext {
    readonly dynamodbBackends: ReadonlyArray<Backend>
  }
}

/** Every backend of this run: DynamoDB Local when Java is found, and dynalite always. */
export const backends: ReadonlyArray<Backend> = inject("dynamodbBackends")

/** Client configuration for a loopback endpoint. */
export const clientConfig = (endpoint: string): DynamoDBClientConfig => ({
  endpoint,
  region: "us-east-1",
  credentials: { accessKeyId: "local", secretAccessKey: "local" },
  // the races send 200 requests at once: let them all be in flight
  requestHandler: { httpAgent: { maxSockets: 256 } }
})

/** A client for a backend. */
export const clientLayer = (backend: Backend): Layer.Layer<DynamoDbClient.DynamoDbClient> =>
  DynamoDbClient.layer(clientConfig(backend.endpoint))

/** A table name no other test uses. */
export const uniqueTableName = (prefix: string): string => `${prefix}-${randomUUID()}`

/** Creates a table while the layer is built (with the live clock: `it.layer` builds with `TestClock`). */
export const tableLayer = (options: DynamoDbTable.TableOptions) =>
  Layer.effectDiscard(TestServices.provideLive(DynamoDbTable.create(options)))

/**
 * Retries without delay: `it.effect` runs on `TestClock`, where a schedule's sleeps would wait
 * until the test moves the clock.
 */
export const immediateRetries = Schedule.recurs(3)

/**
 * A store on a fresh table of `backend`, with the client in the context too (for raw requests and
 * middleware). Transient failures are retried at once (`immediateRetries`) unless told otherwise.
 */
export const storeLayer = (backend: Backend, options?: Partial<DynamoDbStore.Options>) => {
  const tableName = options?.tableName ?? uniqueTableName("store")
  return DynamoDbStore.layerWith({ retrySchedule: immediateRetries, ...options, tableName }).pipe(
    Layer.provide(
      tableLayer({ tableName, keyAttribute: options?.keyAttribute, ttlAttribute: options?.ttlAttribute })
    ),
    Layer.provideMerge(clientLayer(backend))
  )
}
