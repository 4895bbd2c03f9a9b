package clients

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// TestOpenAIGoResponses: openai-go's Responses API (POST /v1/responses),
// whole and streamed, with a function tool, on a scripted backend.
func TestOpenAIGoResponses(t *testing.T) {
	srv := scriptedTools(t)
	c := openaiClient(srv.URL)
	ctx := context.Background()
	params := responses.ResponseNewParams{
		Model:        "minicpm5:2b",
		Instructions: openai.String("Be brief."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("weather in Paris?")},
		Tools:        []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", weatherParams, false)},
	}
	resp, err := c.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != "completed" || len(resp.Output) != 2 || resp.OutputText() != "Checking." {
		t.Fatalf("response %+v", resp)
	}
	call := resp.Output[1].AsFunctionCall()
	if resp.Output[1].Type != "function_call" || call.Name != "get_weather" || call.Arguments != `{"city":"Paris"}` || call.CallID != "call_1" {
		t.Fatalf("call %+v", resp.Output[1])
	}
	req := srv.Fakes()[0].Requests()[0]
	if req.Messages[0].Role != "system" || req.Messages[0].Content != "Be brief." || req.Messages[1].Content != "weather in Paris?" || len(req.Tools) != 1 {
		t.Errorf("backend saw %+v", req)
	}

	stream := c.Responses.NewStreaming(ctx, params)
	var types []string
	var text string
	var done responses.Response
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text += ev.Delta
		case "response.completed":
			done = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.output_item.added " +
		"response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done response.completed"
	if strings.Join(types, " ") != want || text != "Checking." {
		t.Fatalf("events %v, text %q", types, text)
	}
	if len(done.Output) != 2 || done.Output[1].AsFunctionCall().Name != "get_weather" || done.Usage.OutputTokens == 0 {
		t.Errorf("completed response %+v", done)
	}

	// The call and its output go back as input items.
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("weather in Paris?", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name),
		{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openai.String(call.CallID),
			Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("18 C")}}},
	}}
	if _, err := c.Responses.New(ctx, params); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Fakes()[0].Requests()
	got := reqs[len(reqs)-1].Messages
	if len(got) != 4 || len(got[2].ToolCalls) != 1 || got[2].ToolCalls[0].ID != "call_1" || got[3].Role != "tool" || got[3].Content != "18 C" || got[3].ToolCallID != "call_1" {
		t.Errorf("backend saw %+v", got)
	}
}
