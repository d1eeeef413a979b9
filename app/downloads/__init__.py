"""Fetching a model pair, or one catalog model (the Library's embedding model): job.py
(DownloadJob, the Qt-free state machine of one download and its DownloadStatus line) and
controller.py (the Session's one download at a time, a thin Qt adapter around the job and the
download worker).

May import engine/ and app's core modules (workers); never history, widgets, views or
main_window.
"""
