"""Files that go with a prompt: the chips and the ways a file arrives (attachments.py), pictures
for a model that sees, attached, pasted or dropped, and their chips (images.py),
reading them off the GUI thread (document_reader.py) and choosing the pages of a document
larger than the context (section_picker.py).

May import controls/, app's core modules (workers) and engine/ (engine.documents); never
transcript/, panels/, charts/, history, views or main_window.
"""
