#!pyobjects
Port = 8080
Test.fail_without_changes('not-registered-either')
