/**
 * The test infrastructure the workspace's tests, examples and benchmarks share, kept in one place
 * instead of copied into each package's `test/utils`. Private: never published, never documented.
 */

/**
 * Free ports, executables, and servers spawned, awaited and stopped with their scope.
 */
export * as Servers from "./Servers.js"

/**
 * Redis servers started on loopback: one server, or a three-node cluster.
 */
export * as Redis from "./Redis.js"

/**
 * DynamoDB endpoints started on loopback: DynamoDB Local and dynalite.
 */
export * as DynamoDb from "./DynamoDb.js"

/**
 * PostgreSQL for the tests: the `TEST_PG_URL` server, else embedded PGlite behind a socket.
 */
export * as Postgres from "./Postgres.js"

/**
 * Stores on real servers (PostgreSQL, DynamoDB), each on a table of its own, optionally proxied.
 */
export * as Stores from "./Stores.js"

/**
 * The charge application the adapters' retry properties run, and the known-bad case they catch.
 */
export * as Charges from "./Charges.js"

/**
 * Workers bundled with esbuild from the packages' sources and served by Miniflare (workerd).
 */
export * as Workers from "./Workers.js"

/**
 * Clients that count what a store sends: a `SqlClient`'s statements, a `pg` client's queries.
 */
export * as Counting from "./Counting.js"

/**
 * The MariaDB server of a run (`TEST_MYSQL_URL`, else a `mariadbd` started here) and a database of its own.
 */
export * as MariaDb from "./MariaDb.js"

/**
 * TypeScript files of the tests run in processes of their own, and killed at a point they announce.
 */
export * as Children from "./Children.js"
