module github.com/npuchat/npuchat

go 1.26

require gopkg.in/natefinch/lumberjack.v2 v2.2.1 // indirect
