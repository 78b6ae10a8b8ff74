/**
 * The store's table: its definition, and an Effect that creates it (README.md#the-table).
 *
 * @since 0.1.0
 */
import type { CreateTableCommandInput, TableDescription } from "@aws-sdk/client-dynamodb"
import {
  CreateTableCommand,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  UpdateTimeToLiveCommand
} from "@aws-sdk/client-dynamodb"
import { IdempotencyError } from "@effect-idempotency/core"
import * as Deadlines from "@effect-idempotency/core/StoreDeadlines"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { DynamoDbClient } from "./DynamoDbClient.js"
import type { Sender } from "./internal/send.js"
import { ConditionFailed, send } from "./internal/send.js"

/**
 * The default table name.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultTableName = "idempotency"

/**
 * The default name of the partition key attribute.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultKeyAttribute = "id"

/**
 * The default name of the native TTL attribute (epoch seconds).
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultTtlAttribute = "ttl"

/**
 * The names that describe a table.
 *
 * @since 0.1.0
 * @category models
 */
export interface TableOptions {
  readonly tableName: string
  readonly keyAttribute?: string | undefined
  readonly ttlAttribute?: string | undefined
}

/**
 * The `CreateTable` input of a store table.
 *
 * @since 0.1.0
 * @category constructors
 */
export const definition = (options: TableOptions): CreateTableCommandInput => {
  const key = options.keyAttribute ?? defaultKeyAttribute
  return {
    TableName: options.tableName,
    AttributeDefinitions: [{ AttributeName: key, AttributeType: "S" }],
    KeySchema: [{ AttributeName: key, KeyType: "HASH" }],
    BillingMode: "PAY_PER_REQUEST"
  }
}

class Pending extends Data.TaggedError("Pending")<{ readonly table: TableDescription }> {}

const defaultRetry = Schedule.exponential("100 millis").pipe(Schedule.jittered, Schedule.intersect(Schedule.recurs(5)))

const defaultWait = Schedule.spaced("500 millis").pipe(Schedule.intersect(Schedule.recurs(240)))

/**
 * What `create` did; `timeToLive: "unsupported"` on an endpoint without the TTL API.
 *
 * @since 0.1.0
 * @category models
 */
export interface CreateResult {
  readonly created: boolean
  readonly timeToLive: "enabled" | "unsupported"
}

/**
 * Creates the table if it does not exist and enables native TTL: safe at every start (README.md#dynamodbtable).
 *
 * @since 0.1.0
 * @category constructors
 */
export const create = (
  options: TableOptions & {
    /** Default: every 500 ms, up to 2 minutes. */
    readonly waitSchedule?: Schedule.Schedule<unknown> | undefined
  }
): Effect.Effect<CreateResult, IdempotencyError.StoreFailure, DynamoDbClient> =>
  Effect.gen(function*() {
    const { client } = yield* DynamoDbClient
    // set-up requests, without time limits
    const sender: Sender = {
      client,
      retry: defaultRetry,
      requestTimeout: Duration.infinity,
      deadlines: Deadlines.make(Duration.seconds(1))
    }
    const TableName = options.tableName
    const key = options.keyAttribute ?? defaultKeyAttribute
    const ttl = options.ttlAttribute ?? defaultTtlAttribute
    const fail = (cause: string) => new IdempotencyError.StoreError({ method: "createTable", cause })
    const request = <A>(
      effect: Effect.Effect<A | ConditionFailed, IdempotencyError.StoreFailure>
    ): Effect.Effect<A, IdempotencyError.StoreFailure> =>
      Effect.flatMap(effect, (result) =>
        result instanceof ConditionFailed
          ? Effect.fail(new IdempotencyError.StoreError({ method: "createTable", cause: result }))
          : Effect.succeed(result))
    const named = (name: string) => (error: IdempotencyError.StoreFailure) =>
      typeof error.cause === "object" && error.cause !== null && "name" in error.cause && error.cause.name === name

    const created = yield* request(
      send(sender, "createTable", Infinity, (c, abortSignal) =>
        c.send(new CreateTableCommand(definition(options)), { abortSignal }))
    ).pipe(
      Effect.as(true),
      Effect.catchIf(named("ResourceInUseException"), () =>
        Effect.succeed(false))
    )

    const describe = request(
      send(sender, "createTable", Infinity, (c, abortSignal) =>
        c.send(new DescribeTableCommand({ TableName }), { abortSignal }))
    ).pipe(
      Effect.flatMap((output) =>
        output.Table === undefined
          ? Effect.fail(fail(`DescribeTable returned no table ${TableName}`))
          : Effect.succeed(output.Table)
      )
    )
    const settled = (table: TableDescription) =>
      table.TableStatus !== "CREATING" && table.TableStatus !== "UPDATING"
    const table = yield* describe.pipe(
      Effect.filterOrFail(settled, (table) =>
        new Pending({ table })),
      Effect.retry({
        schedule: options.waitSchedule ?? defaultWait,
        while: (error) =>
          error._tag === "Pending"
      }),
      Effect.catchTag("Pending", (pending) =>
        Effect.succeed(pending.table))
    )
    if (table.TableStatus !== "ACTIVE") {
      return yield* fail(`table ${TableName} is ${table.TableStatus ?? "in an unknown state"}, not ACTIVE`)
    }
    const schema = table.KeySchema ?? []
    const keyType = table.AttributeDefinitions?.find((attribute) =>
      attribute.AttributeName === key
    )?.AttributeType
    if (schema.length !== 1 || schema[0]?.AttributeName !== key || schema[0]?.KeyType !== "HASH" || keyType !== "S") {
      return yield* fail(
        `table ${TableName} must have exactly one key, the string partition key "${key}"; it has ${
          JSON.stringify(schema)
        }`
      )
    }

    // a retried request whose first attempt went through
    const alreadyEnabled = (error: IdempotencyError.StoreFailure) =>
      named("ValidationException")(error) && /already enabled/i.test(String(error.cause))
    const timeToLive = yield* request(
      send(sender, "createTable", Infinity, (c, abortSignal) =>
        c.send(new DescribeTimeToLiveCommand({ TableName }), { abortSignal }))
    ).pipe(
      Effect.flatMap((output): Effect.Effect<CreateResult["timeToLive"], IdempotencyError.StoreFailure> => {
        const status = output.TimeToLiveDescription?.TimeToLiveStatus
        const attribute = output.TimeToLiveDescription?.AttributeName
        if (status === "ENABLED" || status === "ENABLING") {
          return attribute === ttl
            ? Effect.succeed("enabled")
            : Effect.fail(fail(`table ${TableName} has native TTL on "${attribute}", not on "${ttl}"`))
        }
        return request(
          send(sender, "createTable", Infinity, (c, abortSignal) =>
            c.send(
              new UpdateTimeToLiveCommand({
                TableName,
                TimeToLiveSpecification: { Enabled: true, AttributeName: ttl }
              }),
              { abortSignal }
            ))
        ).pipe(
          Effect.as("enabled" as const),
          Effect.catchIf(alreadyEnabled, () =>
            Effect.succeed("enabled" as const))
        )
      }),
      Effect.catchIf(named("UnknownOperationException"), () =>
        Effect.as(
          Effect.logWarning(
            `idempotency: this DynamoDB endpoint has no TTL API; expired records are only removed by purgeExpired`
          ),
          "unsupported" as const
        ))
    )
    return { created, timeToLive }
  }).pipe(Effect.withSpan("DynamoDbTable.create", { attributes: { "aws.dynamodb.table_names": [options.tableName] } }))
