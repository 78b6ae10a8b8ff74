import { randomUUID } from "node:crypto"
import { inject } from "vitest"
import { scenarioSuite } from "./scenarioSuite.js"

declare module "vitest" {
  export interface ProvidedContext {
    readonly dynamodbBackends: ReadonlyArray<{ readonly name: string; readonly endpoint: string }>
    readonly redisUrl: string
    readonly redisKeyPrefix: string
  }
}

/** The PostgreSQL server of CI; without `TEST_PG_URL` the suite falls back to embedded PGlite. */
const serverUrl = process.env.TEST_PG_URL === "" ? undefined : process.env.TEST_PG_URL

scenarioSuite("memory store", { _tag: "Memory" })

scenarioSuite("PostgreSQL store on embedded PGlite", { _tag: "PGlite" })

scenarioSuite(
  `PostgreSQL store on ${serverUrl === undefined ? "PGlite (TEST_PG_URL is not set)" : "the TEST_PG_URL server"}`,
  serverUrl === undefined ? { _tag: "PGlite" } : { _tag: "Postgres", url: serverUrl }
)

for (const backend of inject("dynamodbBackends")) {
  scenarioSuite(`DynamoDB store on ${backend.name}`, {
    _tag: "DynamoDB",
    endpoint: backend.endpoint,
    tableName: `examples-${randomUUID()}`
  })
}

scenarioSuite(
  `Redis store on ${process.env.TEST_REDIS_URL ? "the TEST_REDIS_URL server" : "a redis-server started for the run"}`,
  // the run's key prefix: the global setup deletes its keys at the end
  { _tag: "Redis", url: inject("redisUrl"), prefix: `${inject("redisKeyPrefix")}examples:` }
)

// the same scenario through an HTTP server: an HttpRouter route with IdempotencyMiddleware on
// NodeHttpServer, called over loopback, on the PostgreSQL server and on DynamoDB Local
const dynamodbLocal = inject("dynamodbBackends").find((backend) => backend.name === "DynamoDB Local") ??
  inject("dynamodbBackends")[0]!

scenarioSuite(
  `through IdempotencyMiddleware on an HTTP server: PostgreSQL store on ${
    serverUrl === undefined ? "PGlite (TEST_PG_URL is not set)" : "the TEST_PG_URL server"
  }`,
  serverUrl === undefined ? { _tag: "PGlite" } : { _tag: "Postgres", url: serverUrl },
  "server"
)

scenarioSuite(
  `through IdempotencyMiddleware on an HTTP server: DynamoDB store on ${dynamodbLocal.name}`,
  { _tag: "DynamoDB", endpoint: dynamodbLocal.endpoint, tableName: `examples-${randomUUID()}` },
  "server"
)
