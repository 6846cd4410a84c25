package mcpserver

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
)

// protocolErrors is a receiving middleware that gives every protocol
// error a JSON-RPC code: the SDK sends an error that is not a
// *jsonrpc.Error with code 0, which is no valid code. (A tool's refusal is
// not a protocol error: it is a result with isError set.) vigil's code
// goes in the error's data, {"code": "unavailable"}, and its sentence in
// the message.
func protocolErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err == nil {
			return res, nil
		}
		return res, rpcError(err)
	}
}

// rpcError maps err to a JSON-RPC error; one that is already one passes
// through. What names something that is not there (a resource, as the MCP
// specification has it since SEP-2164) or is wrong is -32602, invalid
// params; anything else -32603, internal error.
func rpcError(err error) error {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return err
	}
	code := vigil.ErrorCode(err)
	var te *toolError
	if errors.As(err, &te) {
		code = te.code
	}
	rc := int64(jsonrpc.CodeInternalError)
	switch code {
	case vigil.CodeNotFound, vigil.CodeInvalidRequest, vigil.CodeUnknownKind, vigil.CodeInvalidPredicate, vigil.CodeDeadlineOutOfRange,
		vigil.CodeIntervalTooSmall, vigil.CodePayloadTooLarge:
		rc = jsonrpc.CodeInvalidParams
	}
	data, _ := json.Marshal(map[string]string{"code": string(code)})
	return &jsonrpc.Error{Code: rc, Message: err.Error(), Data: data}
}
