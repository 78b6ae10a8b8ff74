import { defineProject, mergeConfig } from "vitest/config"
import shared from "../../vitest.shared.js"

export default mergeConfig(
  shared,
  defineProject({
    test: {
      name: "sql",
      // the run's MariaDB database (`inject("mysqlUrl")`): on TEST_MYSQL_URL's server, else a mariadbd started here
      globalSetup: ["./test/globalSetup.ts"]
    }
  })
)
