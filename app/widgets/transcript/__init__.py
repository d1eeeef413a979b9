"""The conversation rendered: the transcript document (transcript.py), Markdown rendered and
streamed (markdown_render, markdown_stream, open_fence), code colours (code_highlight), user
text (user_text), provenance colours and legend (provenance), file cards (file_card), a
question's pictures as thumbnails that open whole (picture_card), and the
conversation exported as Markdown, Word, PDF or HTML (export).

May import controls/, attachments/, history, app's core modules and engine/; never panels/,
charts/, views or main_window.
"""
