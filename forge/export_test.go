package forge

// SetMissHook makes c's Reader call fn on every cache miss, once the read
// has joined or started the shared request and before it waits for it.
// Set it before c is used.
func SetMissHook(c *Client, fn func(key string)) { c.reader.missHook = fn }

// GraphQLURL returns the GraphQL endpoint c asks for a GitHub App
// token's login.
func GraphQLURL(c *Client) string { return githubAPI{c}.graphqlURL() }
