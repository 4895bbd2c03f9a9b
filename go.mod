module github.com/npuchat/npuchat

go 1.26.0

require (
	github.com/ardanlabs/jinja v1.8.0
	github.com/dlclark/regexp2 v1.12.0
	github.com/ebitengine/purego v0.11.3
	golang.org/x/sys v0.50.0
	golang.org/x/text v0.44.0
	gopkg.in/natefinch/lumberjack.v2 v2.2.1
)

require github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
