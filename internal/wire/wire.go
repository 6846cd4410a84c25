// Package wire holds what the HTTP API's server (httpapi) and its Go client
// (client) must agree on: the routes' paths, the header names, the event
// stream's heartbeat, the bound of a request body, the shape of the signing
// keys' fingerprints GET /v1/daemon shows, and the one table from error
// code to HTTP status. It
// imports only the root package and the standard library, so a program
// that uses the client alone does not compile the server.
package wire

import (
	"net/url"
	"time"
)

// Header names of the API.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderReplayed       = "Idempotent-Replayed"
	HeaderChainDepth     = "Vigil-Chain-Depth"
	HeaderWaitClamped    = "Vigil-Wait-Clamped"
	HeaderRequestID      = "X-Request-Id"
	// HeaderLastEventID is the header an event stream client sends on
	// reconnecting: the id of the last event it received.
	HeaderLastEventID = "Last-Event-ID"
)

// DefaultHeartbeat is how often an idle event stream sends a comment; a
// client that hears nothing for a few of them takes the stream for dead.
const DefaultHeartbeat = 15 * time.Second

// DefaultMaxBodyBytes bounds a request body the daemon takes (larger is
// refused whole, 413 payload_too_large); a client that splits a batch
// registration keeps each call's body within it.
const DefaultMaxBodyBytes = 1 << 20

// Paths of the API's routes, from its root.
const (
	PathWatches = "/v1/watches"
	PathEvents  = "/v1/events"
	PathTokens  = "/v1/tokens"
	// CompletePrefix starts the path of a completion token's URL.
	CompletePrefix = "/v1/complete/"
	// UnsubscribePrefix starts the path of a delivery mail's one-click
	// unsubscribe link: UnsubscribePrefix + WATCH_ID + "/" + SIG.
	UnsubscribePrefix = "/v1/unsubscribe/"
	recipientsPrefix  = "/v1/recipients/"
)

// WatchPath is the path of the watch id, followed by suffix ("/wait").
func WatchPath(id, suffix string) string { return PathWatches + "/" + url.PathEscape(id) + suffix }

// RecipientPath is the path of recipient r, followed by suffix
// ("/messages").
func RecipientPath(r, suffix string) string { return recipientsPrefix + url.PathEscape(r) + suffix }

// TokenPath is the path of the scoped token id, followed by suffix
// ("/revoke").
func TokenPath(id, suffix string) string { return PathTokens + "/" + url.PathEscape(id) + suffix }

// CompletionPath is the path of a completion token's URL.
func CompletionPath(token string) string { return CompletePrefix + token }
