import { defineProject, mergeConfig } from "vitest/config"
import shared from "../../vitest.shared.js"

export default mergeConfig(
  shared,
  defineProject({
    test: {
      name: "cli",
      globalSetup: [
        // builds dist/bin.js, the executable the tests run
        "./test/globalSetup.ts",
        // the stores' own servers: a suffix for PostgreSQL tables, a MariaDB database (on TEST_MYSQL_URL's
        // server, else a mariadbd started here), a Redis server, DynamoDB Local
        "../sql-pg/test/globalSetup.ts",
        "../sql/test/globalSetup.ts",
        "../redis/test/globalSetup.ts",
        "../dynamodb/test/globalSetup.ts"
      ]
    }
  })
)
