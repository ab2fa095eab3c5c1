package koinon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// StreamVersion is the event stream version this client reads.
const StreamVersion = "1"

// Client is a client of one koinon server, authenticated with one API key.
type Client struct {
	BaseURL string
	APIKey  string
	// HTTP sends the requests (http.DefaultClient when nil). Its Timeout also bounds event
	// streams: leave it 0 and use contexts to follow long runs.
	HTTP *http.Client
	// MaxReconnects bounds reconnections in a row that bring no new event (default 5).
	MaxReconnects int
}

// New returns a client of the server at baseURL.
func New(baseURL, apiKey string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), APIKey: apiKey}
}

func (c *Client) do(ctx context.Context, method, path string, query url.Values, body io.Reader, header http.Header) (*http.Response, error) {
	target := strings.TrimRight(c.BaseURL, "/") + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	request, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, err
	}
	for name, values := range header {
		request.Header[name] = values
	}
	request.Header.Set("Authorization", "Bearer "+c.APIKey)
	request.Header.Set("User-Agent", "koinon-client/0.1 (go)")
	httpClient := c.HTTP
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	response, err := httpClient.Do(request)
	if err != nil {
		return nil, err
	}
	if response.StatusCode >= 400 {
		defer response.Body.Close()
		return nil, errorFromResponse(response)
	}
	return response, nil
}

func (c *Client) json(ctx context.Context, method, path string, query url.Values, payload any) ([]byte, error) {
	var body io.Reader
	header := http.Header{}
	if payload != nil {
		data, err := json.Marshal(payload)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(data)
		header.Set("Content-Type", "application/json")
	}
	response, err := c.do(ctx, method, path, query, body, header)
	if err != nil {
		return nil, err
	}
	defer response.Body.Close()
	return io.ReadAll(response.Body)
}

// Answer asks and waits for the sealed answer (POST /v1/answer).
func (c *Client) Answer(ctx context.Context, request AnswerRequest) (*AnswerResponse, error) {
	raw, err := c.json(ctx, http.MethodPost, "/v1/answer", nil, request)
	if err != nil {
		return nil, err
	}
	return ParseAnswer(raw)
}

// Start starts a streamed run (executed by the server's worker) and returns its run id at
// once; follow it with Events or Collect.
func (c *Client) Start(ctx context.Context, request AnswerRequest) (string, error) {
	payload, err := json.Marshal(request)
	if err != nil {
		return "", err
	}
	var body map[string]any
	_ = json.Unmarshal(payload, &body)
	body["stream"], body["stream_version"] = true, StreamVersion
	data, _ := json.Marshal(body)
	header := http.Header{"Content-Type": {"application/json"}, "Accept": {"text/event-stream"}}
	response, err := c.do(ctx, http.MethodPost, "/v1/answer", nil, bytes.NewReader(data), header)
	if err != nil {
		return "", err
	}
	response.Body.Close()
	runID := response.Header.Get("Koinon-Run-Id")
	if runID == "" {
		return "", streamError(ErrStream, "no_run_id", "the server named no run")
	}
	return runID, nil
}

// Events calls handle with each event of the run (GET /v1/runs/<id>/events, version 1)
// up to its final one. When the connection drops, or the stream ends without a final
// event, it reconnects with Last-Event-ID set to the last event received: nothing is lost,
// and an id seen before is never handed over twice. After MaxReconnects attempts in a row
// that bring no new event it returns an Error of kind ErrStream (stream_interrupted).
// Error answers (404, 400) return at once; so does an error from handle.
func (c *Client) Events(ctx context.Context, runID, lastEventID string, handle func(Event) error) error {
	maxReconnects := c.MaxReconnects
	if maxReconnects == 0 {
		maxReconnects = 5
	}
	cursor, seen, failures := lastEventID, map[string]bool{}, 0
	path := "/v1/runs/" + url.PathEscape(runID) + "/events"
	for {
		header := http.Header{"Accept": {"text/event-stream"}}
		if cursor != "" {
			header.Set("Last-Event-ID", cursor)
		}
		response, err := c.do(ctx, http.MethodGet, path, url.Values{"stream_version": {StreamVersion}}, nil, header)
		var koinonError *Error
		if err != nil && (errors.As(err, &koinonError) || ctx.Err() != nil) {
			return err // the server's answer, or the caller gave up: not a drop
		}
		if err == nil {
			final, err := readEvents(response.Body, func(event Event) (bool, error) {
				if event.ID != "" {
					if seen[event.ID] {
						return false, nil // a server or proxy replaying: skip it
					}
					seen[event.ID], cursor = true, event.ID
				}
				failures = 0 // progress: a new event
				return event.Final(), handle(event)
			})
			response.Body.Close()
			if err != nil && !errors.Is(err, errDropped) {
				return err
			}
			if final {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		failures++ // dropped, or ended without a final event: resume after the cursor
		if failures > maxReconnects {
			return streamError(ErrStream, "stream_interrupted",
				fmt.Sprintf("the event stream of run %s ended without a final event", runID))
		}
	}
}

var errDropped = errors.New("koinon: the connection dropped")

// readEvents parses a text/event-stream body (WHATWG rules: \n, \r\n or \r line ends, ':'
// comments, data lines joined by \n) until a final event, the end, or a read error
// (errDropped). It reports whether a final event was handed over.
func readEvents(body io.Reader, handle func(Event) (bool, error)) (bool, error) {
	scanner := bufio.NewScanner(body)
	scanner.Buffer(make([]byte, 64*1024), 64<<20)
	scanner.Split(scanLines)
	var id, name string
	var data []string
	for scanner.Scan() {
		line := scanner.Text()
		if line == "" {
			if len(data) > 0 {
				event := Event{ID: id, Event: name, Data: json.RawMessage(strings.Join(data, "\n"))}
				if event.Event == "" {
					event.Event = "message"
				}
				final, err := handle(event)
				if err != nil || final {
					return final, err
				}
			}
			id, name, data = "", "", nil
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			if !strings.Contains(value, "\x00") {
				id = value
			}
		case "event":
			name = value
		case "data":
			data = append(data, value)
		}
	}
	if scanner.Err() != nil {
		return false, errDropped
	}
	return false, nil
}

func scanLines(data []byte, atEOF bool) (int, []byte, error) {
	for i, b := range data {
		if b == '\n' {
			return i + 1, data[:i], nil
		}
		if b == '\r' {
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return i + 2, data[:i], nil
				}
				return i + 1, data[:i], nil
			}
			if atEOF {
				return i + 1, data[:i], nil
			}
			return 0, nil, nil // a \r\n may be split between reads
		}
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// Collect follows the run's events to the end and returns its sealed answer: an Error of
// kind ErrRunFailed for a failed run, ErrStream for a stream that timed out or could not be
// resumed.
func (c *Client) Collect(ctx context.Context, runID, lastEventID string) (*AnswerResponse, error) {
	var answer *AnswerResponse
	var ended error
	err := c.Events(ctx, runID, lastEventID, func(event Event) error {
		switch event.Event {
		case "completed":
			var data struct {
				Payload struct {
					Result json.RawMessage `json:"result"`
				} `json:"payload"`
			}
			if err := json.Unmarshal(event.Data, &data); err != nil {
				return err
			}
			parsed, err := ParseAnswer(data.Payload.Result)
			answer = parsed
			return err
		case "failed":
			var data struct {
				Code string `json:"code"`
			}
			_ = json.Unmarshal(event.Data, &data)
			if data.Code == "" {
				data.Code = "failed"
			}
			ended = streamError(ErrRunFailed, data.Code, "run "+runID+" failed")
		case "timeout", "error":
			ended = streamError(ErrStream, event.Event, "the stream of run "+runID+" ended: "+event.Event)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if ended != nil {
		return nil, ended
	}
	if answer == nil {
		return nil, streamError(ErrStream, "stream_interrupted", "run "+runID+" ended without an answer")
	}
	return answer, nil
}

// Run is GET /v1/runs/<id>: the latest published body, as you may read it now.
func (c *Client) Run(ctx context.Context, runID string) (*AnswerResponse, error) {
	raw, err := c.json(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(runID), nil, nil)
	if err != nil {
		return nil, err
	}
	return ParseAnswer(raw)
}

// Audit is GET /v1/runs/<id>/audit: plan, steps, retrieval manifest, and output_release
// only where a release row exists.
func (c *Client) Audit(ctx context.Context, runID string) (map[string]any, error) {
	raw, err := c.json(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(runID)+"/audit", nil, nil)
	if err != nil {
		return nil, err
	}
	var audit map[string]any
	return audit, json.Unmarshal(raw, &audit)
}

// Retry is POST /v1/runs/<id>/retry: generation n+1; earlier receipts remain.
func (c *Client) Retry(ctx context.Context, runID string) (*AnswerResponse, error) {
	raw, err := c.json(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(runID)+"/retry", nil, nil)
	if err != nil {
		return nil, err
	}
	return ParseAnswer(raw)
}

// Upload is one file for POST /v1/documents: give Space (curators) or Private.
type Upload struct {
	Filename string
	Content  []byte
	Space    int
	Private  bool
	Title    string
	Document int
}

// UploadDocument sends a file (multipart); the server's description of the revision.
func (c *Client) UploadDocument(ctx context.Context, upload Upload) (map[string]any, error) {
	var body bytes.Buffer
	form := multipart.NewWriter(&body)
	part, err := form.CreateFormFile("file", upload.Filename)
	if err != nil {
		return nil, err
	}
	if _, err := part.Write(upload.Content); err != nil {
		return nil, err
	}
	fields := map[string]string{}
	if upload.Space != 0 {
		fields["space"] = strconv.Itoa(upload.Space)
	}
	if upload.Private {
		fields["private"] = "true"
	}
	if upload.Title != "" {
		fields["title"] = upload.Title
	}
	if upload.Document != 0 {
		fields["document"] = strconv.Itoa(upload.Document)
	}
	for name, value := range fields {
		if err := form.WriteField(name, value); err != nil {
			return nil, err
		}
	}
	if err := form.Close(); err != nil {
		return nil, err
	}
	header := http.Header{"Content-Type": {form.FormDataContentType()}}
	response, err := c.do(ctx, http.MethodPost, "/v1/documents", nil, &body, header)
	if err != nil {
		return nil, err
	}
	defer response.Body.Close()
	var described map[string]any
	return described, json.NewDecoder(response.Body).Decode(&described)
}

// SearchRequest asks GET /v1/search for raw, unverified retrieval candidates.
type SearchRequest struct {
	Query  string
	Spaces []int
	Tools  []string
	Limit  int
}

// Search returns raw retrieval candidates, labelled unverified.
func (c *Client) Search(ctx context.Context, request SearchRequest) (*SearchResults, error) {
	query := url.Values{"q": {request.Query}}
	for _, space := range request.Spaces {
		query.Add("space", strconv.Itoa(space))
	}
	if len(request.Tools) > 0 {
		query.Set("tools", strings.Join(request.Tools, ","))
	}
	if request.Limit > 0 {
		query.Set("limit", strconv.Itoa(request.Limit))
	}
	raw, err := c.json(ctx, http.MethodGet, "/v1/search", query, nil)
	if err != nil {
		return nil, err
	}
	var results SearchResults
	return &results, json.Unmarshal(raw, &results)
}
